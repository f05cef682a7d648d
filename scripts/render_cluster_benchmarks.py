#!/usr/bin/env python3
"""Renders the pool-across-hosts section of docs/benchmarks.md from the raw results that
scripts/bench-cluster.sh commits in docs/results/cluster.json.

usage: render_cluster_benchmarks.py   (rewrites docs/benchmarks.md between its cluster markers)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- cluster:begin -->", "<!-- cluster:end -->"
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")


def gbit(gbytes_per_s):
    return gbytes_per_s * 8


def arm_title(arm):
    return "uncapped rails" if arm["rail_gbps"] == 0 else f"rails capped at {arm['rail_gbps']:g} Gbit/s per NIC"


def render():
    with open(os.path.join(DOCS, "results", "cluster.json")) as f:
        r = json.load(f)
    out = [BEGIN, "## The pool across hosts: parts by rail on a namespace cluster (issue: pool across servers)", ""]
    out.append(f"Measured with `{r['command']}` on {r['date']} ({r['machine']}). {r['cluster']}: every "
               "server is a network namespace, every rail a bridge, every NIC a veth pair (capped with `tc tbf` "
               "where stated); all traffic is real tcp between processes in different namespaces. Raw results: "
               "`docs/results/cluster.json`. Every figure is *measured*.")
    out += ["", "### kvpool tcp vs iperf3 over the same veth pair (client on server 0, store on server 1, rail 0)", "",
            "iperf3 runs 3 s with 1 and with 4 streams; the ratio is against the better of the two in the same "
            "direction (PUT = client to store, GET = store to client). `kvpool bench`: batches of 8 values, one "
            "thread, 4 pooled connections per store, medians of the repetitions.", "",
            "| rails | iperf3 PUT 1 / 4 streams | iperf3 GET 1 / 4 streams | value | kvpool PUT | kvpool GET | PUT / iperf3 | GET / iperf3 |",
            "|---|---|---|---|---|---|---|---|"]
    for arm in r["arms"]:
        ip = arm["iperf3_gbps"]
        best_put, best_get = max(ip["put_1"], ip["put_4"]), max(ip["get_1"], ip["get_4"])
        for k in arm["kvpool_bench"]:
            put, get = gbit(k["put_gbps"]), gbit(k["get_gbps"])
            out.append(f"| {arm_title(arm)} | {ip['put_1']:.2f} / {ip['put_4']:.2f} | {ip['get_1']:.2f} / {ip['get_4']:.2f} "
                       f"| {k['value_size'] >> 20} MiB | {put:.2f} | {get:.2f} | {put / best_put:.2f} | {get / best_get:.2f} |")
    out += ["", "All rates in Gbit/s.", ""]

    p = r["arms"][0]["restore_4_parts"]
    out += ["### Restore of a 4-stage prefix: 4 parts on 4 rails vs one part", "",
            f"`kvpool_pool_parts_bench`: {p['chunks']} chunks x {p['stages']} stage objects of "
            f"{p['object_size'] >> 20} MiB ({p['restore_bytes'] / 2**20:.0f} MiB), one reader thread per "
            "stage as the connector's restore workers, every byte checked once; median of "
            f"{p['repeat']} repetitions. *4 parts*: stage s in part s (its own rail, master and store); "
            "*1 part*: every stage in part 1.", "",
            "| rails | 4 parts | 1 part | 4 parts / 1 part |", "|---|---|---|---|"]
    for arm in r["arms"]:
        four, one = arm["restore_4_parts"], arm["restore_1_part"]
        out.append(f"| {arm_title(arm)} | {gbit(four['restore_gbps']):.2f} Gbit/s | {gbit(one['restore_gbps']):.2f} Gbit/s "
                   f"| {four['restore_gbps'] / one['restore_gbps']:.2f}x |")
    out += ["", "### Prefix lookup across 4 parts' masters vs one", "",
            f"One `BatchLookup` of all {p['lookup_keys']} stage keys (it also takes the read leases), as the "
            f"connector's prefix lookup, {p['lookups']} times; with 4 parts it is 4 concurrent round trips of "
            f"{p['lookup_keys'] // 4} keys (one completion queue, drained by the calling thread), with 1 part one "
            f"round trip of {p['lookup_keys']} keys. Two of the four masters share server 0 with the client; the "
            "one-part arm's master is on server 1.", "",
            "| rails | 4 parts p50 / p99 | 1 part p50 / p99 | p50 ratio |", "|---|---|---|---|"]
    for arm in r["arms"]:
        four, one = arm["restore_4_parts"], arm["restore_1_part"]
        out.append(f"| {arm_title(arm)} | {four['lookup_p50_us']:.0f} / {four['lookup_p99_us']:.0f} µs "
                   f"| {one['lookup_p50_us']:.0f} / {one['lookup_p99_us']:.0f} µs | {four['lookup_p50_us'] / one['lookup_p50_us']:.2f} |")
    out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    write_section(render(), BEGIN, END)


if __name__ == "__main__":
    main()
