#!/usr/bin/env python3
"""Renders the "UCX transport" section of docs/benchmarks.md from docs/results/ucx-transport.json,
which scripts/bench-ucx.sh writes: kvpool_transfer_bench --ucx and iperf3 in one run. Nothing is
typed in.

usage: render_ucx_benchmarks.py   (rewrites docs/benchmarks.md between its ucx markers)
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- ucx:begin -->", "<!-- ucx:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "ucx-transport.json")


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def span(ratios):
    return f"{min(ratios):.2f}" if max(ratios) - min(ratios) < 0.005 else f"{min(ratios):.2f}–{max(ratios):.2f}"


def render(r):
    d = r["default"]
    threads = d["config"]["copy_threads"]
    memcpy_key = f"memcpy_{threads}t_gbps"
    iperf1, iperf4 = (statistics.median(r["iperf3_gbps"][k]) for k in ("streams_1", "streams_4"))
    tuned = {s["value_bytes"]: s for s in r["tcp_256k_segments"]["sizes"]}
    tcp_rows = ["| value | ucx read | ucx write | ucx read, 256 KiB segments | ucx write, 256 KiB segments | "
                "kvpool tcp read | kvpool tcp write | iperf3, 1 stream | iperf3, 4 streams | best ucx / kvpool tcp |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    default_ratio, tuned_ratio, sm_ratio = [], [], []
    sm_rows = ["| value | ucx read | ucx write | kvpool shm read | kvpool shm write | memcpy, 1 thread | "
               f"memcpy, {threads} threads | ucx / kvpool shm |",
               "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in d["sizes"]:
        t = tuned[s["value_bytes"]]
        best_ucx = min(max(s["ucx_tcp_read_gbps"], t["ucx_tcp_read_gbps"]),
                       max(s["ucx_tcp_write_gbps"], t["ucx_tcp_write_gbps"]))
        kvpool_tcp = min(s["tcp_read_gbps"], s["tcp_write_gbps"])
        default_ratio.append(min(s["ucx_tcp_read_gbps"], s["ucx_tcp_write_gbps"]) / kvpool_tcp)
        tuned_ratio.append(min(t["ucx_tcp_read_gbps"], t["ucx_tcp_write_gbps"]) / kvpool_tcp)
        tcp_rows.append(f"| {size_name(s['value_bytes'])} | {s['ucx_tcp_read_gbps']:.2f} | {s['ucx_tcp_write_gbps']:.2f} | "
                        f"{t['ucx_tcp_read_gbps']:.2f} | {t['ucx_tcp_write_gbps']:.2f} | {s['tcp_read_gbps']:.2f} | "
                        f"{s['tcp_write_gbps']:.2f} | {iperf1:.2f} | {iperf4:.2f} | {best_ucx / kvpool_tcp:.2f} |")
        ucx_sm = min(s["ucx_sm_read_gbps"], s["ucx_sm_write_gbps"])
        shm = min(s["shm_read_gbps"], s["shm_write_gbps"])
        sm_ratio.append(ucx_sm / shm)
        sm_rows.append(f"| {size_name(s['value_bytes'])} | {s['ucx_sm_read_gbps']:.2f} | {s['ucx_sm_write_gbps']:.2f} | "
                       f"{s['shm_read_gbps']:.2f} | {s['shm_write_gbps']:.2f} | {s['memcpy_1t_gbps']:.2f} | "
                       f"{s[memcpy_key]:.2f} | {ucx_sm / shm:.2f} |")
    return "\n".join([
        BEGIN, "## UCX transport (issue 20)", "",
        f"Run with `{r['command']}` on {r['date']} ({r['machine']}, UCX {r['ucx_version']}, Debian's libucx0); raw "
        "results `docs/results/ucx-transport.json`. Every figure is *measured*: GB/s (1e9 bytes/s), the median of "
        f"{d['config']['reps']} repetitions of a {d['config']['working_set_bytes'] >> 20} MiB working set moved as one "
        "batch of values of the size shown, client and store in one process (`kvpool_transfer_bench --ucx`, every "
        "case interleaved), so each figure includes the store's CPU. iperf3 is the median of "
        f"{len(r['iperf3_gbps']['streams_1'])} runs of 3 s on 127.0.0.1, before and after the benchmark.", "",
        "**UCX over tcp (loopback)**, against kvpool's own tcp transport and iperf3:", "",
        *tcp_rows, "",
        "**UCX over shared memory** (UCX_TLS=sm: posix/sysv/cma), against kvpool's shm transport and memcpy:", "",
        *sm_rows, "",
        "What these say: UCX's value is RDMA, which this machine does not have, so **RDMA is untested here**. "
        f"Over plain tcp UCX reaches {span(default_ratio)} of kvpool's tcp transport with its defaults (8 KiB "
        f"segments; it emulates one-sided reads with messages) and {span(tuned_ratio)} with 256 KiB segments "
        "(the slower of read and write, per value size). On one host UCX's shared memory reaches "
        f"{span(sm_ratio)} of kvpool's shm transport (the segment mapped, copies by two threads). So "
        "`--transport ucx` is for hosts where UCX finds verbs/RoCE; to enable it there: give the stores and clients "
        "`--transport ucx`, leave `--ucx-tls` unset (UCX then picks `rc`/`dc` over the HCA) or name it (`rc,sm`), "
        "name the HCA port with `--ucx-devices mlx5_0:1`, and raise the memlock limit (`LimitMEMLOCK=infinity`) "
        "for the stores, whose whole segment UCX registers.",
        END])


def main():
    with open(RESULTS) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
