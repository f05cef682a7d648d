"""torch.index_select baseline for the connector's unpack kernel: gather the same 128K-token
MLA stage (21 layers x 576 B/token, 16-token blocks, random block ids) from packed staging into
a paged cache with torch (index_copy_ per layer plane), and the reverse gather (index_select).
Prints one JSON line per measurement. Needs torch with CUDA."""
import json
import sys
import time

import torch


def median_seconds(fn, reps=9):
    fn()  # warm-up: allocator, kernels' first launch
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 131072
    layers, token_bytes, block = 21, 576, 16
    blocks = tokens // block
    num_blocks = blocks + blocks // 8
    dev = torch.device("cuda")
    cache = [torch.zeros(num_blocks, block * token_bytes, dtype=torch.uint8, device=dev) for _ in range(layers)]
    staging = torch.randint(0, 255, (layers, blocks, block * token_bytes), dtype=torch.uint8, device=dev)
    table = torch.randperm(num_blocks, device=dev)[:blocks]
    nbytes = staging.numel()

    def scatter():  # staging -> paged cache (what unpack does)
        for layer in range(layers):
            cache[layer].index_copy_(0, table, staging[layer])

    def gather():  # paged cache -> staging (what pack does)
        for layer in range(layers):
            torch.index_select(cache[layer], 0, table, out=staging[layer])

    for name, fn in (("torch index_copy_ (unpack)", scatter), ("torch index_select (pack)", gather)):
        s = median_seconds(fn)
        print(json.dumps({"what": name, "gbps": round(nbytes / s / 1e9, 2), "ms": round(s * 1e3, 2)}))


if __name__ == "__main__":
    main()
