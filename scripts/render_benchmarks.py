#!/usr/bin/env python3
"""Renders the pool-core section of docs/benchmarks.md from the raw results scripts/bench-pool.sh
commits in docs/results/pool-core.json; and the helpers every renderer of that page shares
(spliced_page and write_section write each section's freshness stamp: scripts/freshness.py).

usage: render_benchmarks.py [POOL_CORE.json]   (rewrites docs/benchmarks.md between its pool markers)
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import freshness  # noqa: E402

BEGIN, END = "<!-- pool:begin -->", "<!-- pool:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "pool-core.json")


def size_name(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def render(r):
    shm = {x["value_size"]: x for x in r["shm"]}
    tcp = {x["value_size"]: x for x in r["tcp"]}
    batches = r.get("shm_batches", [])
    redis = {x["value_size"]: x for x in r.get("redis", [])}
    memcached = {x["value_size"]: x for x in r.get("memcached", [])}
    transfer, master = r["transfer"], r["master"]
    out = []
    w = out.append
    w(BEGIN)
    w("## Pool core (issue: master, store, client, transfer)")
    w("")
    w(f"Measured {r['date']} on {r['machine']} — the project's 2-core CPU machine, shared "
      "and noisy, so every figure is a median over repetitions and the verdicts are ratios taken "
      "inside one run. Regenerate with `scripts/bench-pool.sh` (raw results in `docs/results/pool-core.json`).")
    w("")
    w(f"Store: {r.get('store_backing') or '?'}.")
    w("")
    w("Setup: `kvpool master` and `kvpool store --memory 2GiB` as separate processes, "
      "`kvpool bench` as the client process; 1 client thread, batches of 8 values; each repetition "
      "puts then gets (checking every value's stamps) then removes the phase's objects.")
    w("")
    w("### Same-host path (shm) vs memcpy, redis and memcached")
    w("")
    w("memcpy copies the same bytes in the same run on as many threads as one kvpool copy may use "
      "(`--copy-threads 2`). redis-server 7 and memcached 1.6 serve over unix sockets, pipelined "
      "8 deep (`build/bench/kvpool_kv_baseline_bench`). GB/s = 10^9 bytes/s.")
    w("")
    w("| value | kvpool PUT | kvpool GET | memcpy | PUT / memcpy | GET / memcpy | redis SET / GET | "
      "memcached SET / GET | kvpool vs better of redis/memcached (PUT, GET) |")
    w("|---|---|---|---|---|---|---|---|---|")
    for size in sorted(shm):
        s = shm[size]
        r, m = redis.get(size), memcached.get(size)
        best_set = max(x["set_gbps"] for x in (r, m) if x) if (r or m) else None
        best_get = max(x["get_gbps"] for x in (r, m) if x) if (r or m) else None
        vs = f"{s['put_gbps'] / best_set:.1f}× , {s['get_gbps'] / best_get:.1f}×" if best_set else "—"
        w(f"| {size_name(size)} | {s['put_gbps']:.2f} | {s['get_gbps']:.2f} | {s['memcpy_gbps']:.2f} | "
          f"{100 * s['put_gbps'] / s['memcpy_gbps']:.0f}% | {100 * s['get_gbps'] / s['memcpy_gbps']:.0f}% | "
          f"{r['set_gbps']:.2f} / {r['get_gbps']:.2f} | {m['set_gbps']:.2f} / {m['get_gbps']:.2f} | {vs} |"
          if r and m else f"| {size_name(size)} | {s['put_gbps']:.2f} | {s['get_gbps']:.2f} | "
          f"{s['memcpy_gbps']:.2f} | | | | | |")
    if batches:
        w("")
        w("Small values and batch size (64 KiB values, shm): the metadata round trip per batch is "
          "what small values pay; larger batches amortise it.")
        w("")
        w("| batch | PUT GB/s | GET GB/s | memcpy | PUT / memcpy | GET / memcpy | GET batch p50 |")
        w("|---|---|---|---|---|---|---|")
        rows = [shm[1 << 16]] if (1 << 16) in shm else []
        for b in rows + batches:
            w(f"| {b['batch']} | {b['put_gbps']:.2f} | {b['get_gbps']:.2f} | {b['memcpy_gbps']:.2f} | "
              f"{100 * b['put_gbps'] / b['memcpy_gbps']:.0f}% | {100 * b['get_gbps'] / b['memcpy_gbps']:.0f}% | "
              f"{b['get_batch_p50_us']:.0f} µs |")
    w("")
    w("Latency per batch call (shm, p50 / p99):")
    w("")
    w("| value | PUT p50 | PUT p99 | GET p50 | GET p99 |")
    w("|---|---|---|---|---|")
    for size in sorted(shm):
        s = shm[size]
        w(f"| {size_name(size)} | {s['put_batch_p50_us']:.0f} µs | {s['put_batch_p99_us']:.0f} µs | "
          f"{s['get_batch_p50_us']:.0f} µs | {s['get_batch_p99_us']:.0f} µs |")
    w("")
    w("### Cross-host path (tcp over loopback) vs raw loopback TCP")
    w("")
    raw = transfer["raw_tcp_gbps"]
    raw_n_key = [k for k in raw if k != "streams_1"][0]
    raw_n = raw[raw_n_key]
    w(f"Raw loopback TCP in this run: {raw['streams_1']:.2f} GB/s on 1 stream, {raw_n:.2f} GB/s on "
      f"{raw_n_key.split('_')[1]} streams (`kvpool_transfer_bench`, a plain blaster). kvpool's tcp "
      "transport stripes large requests over 4 pooled connections.")
    w("")
    w("| value | kvpool PUT (processes) | kvpool GET (processes) | engine write / read (one process) | "
      "GET / raw TCP | engine read / raw TCP |")
    w("|---|---|---|---|---|---|")
    engine = {r["value_bytes"]: r for r in transfer["sizes"]}
    for size in sorted(tcp):
        t = tcp[size]
        e = engine.get(size)
        e_cell = f"{e['tcp_write_gbps']:.2f} / {e['tcp_read_gbps']:.2f}" if e else "—"
        e_ratio = f"{100 * e['tcp_read_gbps'] / raw_n:.0f}%" if e else "—"
        w(f"| {size_name(size)} | {t['put_gbps']:.2f} | {t['get_gbps']:.2f} | {e_cell} | "
          f"{100 * t['get_gbps'] / raw_n:.0f}% | {e_ratio} |")
    w("")
    w("### Master")
    w("")
    w(f"`kvpool_master_bench --threads {master['threads']} --seconds {master['seconds']}`: an in-process "
      "master on loopback gRPC, client threads in the same process (so they share the 2 cores).")
    w("")
    w("| call | batch | rate | p50 per call | p99 per call | errors |")
    w("|---|---|---|---|---|---|")
    for p in master["phases"]:
        w(f"| {p['name']} | {p['batch']} | {p['rate']:,.0f} {p['unit']} | {p['p50_us']:.0f} µs | "
          f"{p['p99_us']:.0f} µs | {p['errors']} |")
    w("")
    w("Published peer on the same kind of machine (design.md, Mooncake store, loopback): TCP PUT ~0.98 / "
      "GET ~1.16 GB/s for 1 MiB between processes; in-process memcpy path batch 8: PUT ~5.1, GET ~10.7 "
      "GB/s; master BatchGet ~397K keys/s, BatchPut ~67K keys/s.")
    w(END)
    return "\n".join(out)


def spliced_page(section, begin, end):
    """docs/benchmarks.md with what lies between the markers `begin` and `end` replaced by
    `section` (which carries the markers itself); appended when the page has no such markers.
    The section's freshness stamps are written in (scripts/freshness.py)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "benchmarks.md")
    existing = open(path).read() if os.path.exists(path) else "# kvpool benchmarks\n"
    section = freshness.stamped(section, "docs/benchmarks.md")
    if begin in existing and end in existing:
        head, rest = existing.split(begin, 1)
        return head + section + rest.split(end, 1)[1]
    return existing.rstrip("\n") + "\n\n" + section + "\n"


def copy_plots(plots, prefix):
    """Copies kvpool report's PNGs from `plots` to docs/img/<prefix>-<name>.png (those present)."""
    img = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "img")
    os.makedirs(img, exist_ok=True)
    for name in ("throughput", "token_sources", "ttft"):
        src = os.path.join(plots, f"{name}.png")
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(img, f"{prefix}-{name}.png"))


def spread(values, scale=100, unit="", digits=1):
    """The median and, with several values, their range: "+4.2 (+3.1 to +5.0)"."""
    v = sorted(values)
    med = v[len(v) // 2]
    text = f"{scale * med:+.{digits}f}{unit}"
    return text if len(v) == 1 else f"{text} ({scale * v[0]:+.{digits}f} to {scale * v[-1]:+.{digits}f}{unit})"


def write_section(section, begin, end):
    """Rewrites docs/benchmarks.md with `section` between its markers (see spliced_page)."""
    page = spliced_page(section, begin, end)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "benchmarks.md"), "w") as f:
        f.write(page)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else RESULTS
    if not os.path.exists(path):
        sys.exit(f"render_benchmarks: no {path}: run scripts/bench-pool.sh (it writes it)")
    with open(path) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
