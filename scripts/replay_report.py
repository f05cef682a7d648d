#!/usr/bin/python3
"""Plots from `kvpool replay --json` results (run by `kvpool report`, or directly).

    scripts/replay_report.py --out DIR RESULTS.json [MORE.json ...]

Writes three PNGs into DIR, one line/bar group per arm ("pool", "no-pool"; on several
servers "shared pool" and "split pool"):
  throughput.png     throughput per GPU (tok/s) by load (sessions, or the Poisson arrival
                     rate of a paced replay); on several
                     servers the system's (all GPUs)
  token_sources.png  stacked prompt-token sources (GPU cache / pool / computed) per
                     (sessions, mode), with the trace's reuse ceiling marked
  ttft.png           TTFT p50 and p90 by concurrency
and prints a one-line-per-run table. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_STYLE = {"pool": ("tab:blue", "shared pool"), "no-pool": ("tab:orange", "no pool (GPU cache only)"),
              "shared": ("tab:blue", "shared pool"), "split": ("tab:red", "split pools (one per server)")}


def arm(run):
    """A run's arm: its mode, or with several servers its pool scope ("shared" / "split")."""
    return run.get("pool_scope") or run["mode"]


def load(run):
    """A run's load point: its Poisson arrival rate when paced, else its concurrent sessions."""
    return run["arrival_rate"] if run.get("arrival_rate", 0) > 0 else run["sessions"]


def load_axis(runs):
    paced = any(r.get("arrival_rate", 0) > 0 for r in runs)
    return "arrival rate (requests/s, Poisson)" if paced else "concurrent sessions"


def multi_server(runs):
    return any(r.get("servers", 1) > 1 for r in runs)


def load_runs(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        runs.extend(doc.get("runs", []))
    if not runs:
        sys.exit("replay_report: no runs in " + ", ".join(paths))
    return runs


def by_mode(runs):
    modes = {}
    for r in runs:
        modes.setdefault(arm(r), []).append(r)
    for rs in modes.values():
        rs.sort(key=load)
    return modes


def plot_throughput(modes, out):
    every = [r for rs in modes.values() for r in rs]
    system = multi_server(every)
    key = "throughput_tok_s" if system else "throughput_tok_s_per_gpu"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mode, rs in sorted(modes.items()):
        color, label = MODE_STYLE.get(mode, (None, mode))
        xs = [load(r) for r in rs]
        ys = [r[key] / 1000 for r in rs]
        ax.plot(xs, ys, marker="o", color=color, label=label)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.1f}K", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xlabel(load_axis(every))
    ax.set_ylabel(("system throughput, all GPUs" if system else "throughput per GPU") + " (K tok/s, emulated)")
    ax.set_title(("System throughput" if system else "Throughput per GPU") + " (prompt + generated tokens)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=120)
    plt.close(fig)


def plot_token_sources(runs, out):
    order = {"pool": 0, "shared": 0, "split": 1}
    runs = sorted(runs, key=lambda r: (load(r), order.get(arm(r), 2)))
    labels = [f'{load(r):g}\n{arm(r)}' for r in runs]
    gpu = [100 * r["token_sources"]["gpu_cache_share"] for r in runs]
    pool = [100 * r["token_sources"]["pool_share"] for r in runs]
    computed = [100 * r["token_sources"]["computed_share"] for r in runs]
    ceiling = [100 * r["token_sources"]["ceiling"] for r in runs]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(runs) + 2), 4.4))
    xs = range(len(runs))
    ax.bar(xs, gpu, color="tab:green", label="GPU prefix cache")
    ax.bar(xs, pool, bottom=gpu, color="tab:blue", label="pool")
    ax.bar(xs, computed, bottom=[g + p for g, p in zip(gpu, pool)], color="tab:gray", label="computed")
    ax.scatter(xs, ceiling, marker="_", s=400, color="black", zorder=3, label="trace reuse ceiling")
    for x, g, p in zip(xs, gpu, pool):
        ax.annotate(f"{g + p:.0f}%", (x, g + p), textcoords="offset points", xytext=(0, -12), ha="center",
                    fontsize=8, color="white")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("share of prompt tokens (%)")
    ax.set_ylim(0, 100)
    unit = "req/s" if any(r.get("arrival_rate", 0) > 0 for r in runs) else "sessions"
    ax.set_title(f"Where prompt tokens came from ({unit} / arm; emulated)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "token_sources.png"), dpi=120)
    plt.close(fig)


def plot_ttft(modes, out):
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mode, rs in sorted(modes.items()):
        color, label = MODE_STYLE.get(mode, (None, mode))
        xs = [load(r) for r in rs]
        ax.plot(xs, [r["ttft_s"]["p50"] for r in rs], marker="o", color=color, label=f"{label} p50")
        ax.plot(xs, [r["ttft_s"]["p90"] for r in rs], marker="^", linestyle="--", color=color, label=f"{label} p90")
    ax.set_xlabel(load_axis([r for rs in modes.values() for r in rs]))
    ax.set_ylabel("TTFT (s, emulated)")
    ax.set_title("Time to first token")
    values = [r["ttft_s"][q] for rs in modes.values() for r in rs for q in ("p50", "p90") if r["ttft_s"][q] > 0]
    if values and max(values) > 30 * min(values):
        ax.set_yscale("log")  # a collapsed mode would flatten the others
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ttft.png"), dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON files from kvpool replay --json")
    parser.add_argument("--out", default="replay-report", help="folder for the PNG files")
    args = parser.parse_args()
    runs = load_runs(args.results)
    os.makedirs(args.out, exist_ok=True)
    modes = by_mode(runs)
    plot_throughput(modes, args.out)
    plot_token_sources(runs, args.out)
    plot_ttft(modes, args.out)
    print(f"{'sessions':>8} {'mode':>8} {'tok/s/GPU':>10} {'TTFT p50':>9} {'p90':>7} {'GPU%':>6} {'pool%':>6} "
          f"{'comp%':>6} {'ceil%':>6} {'verify':>6} {'failed':>6}")
    for r in sorted(runs, key=lambda r: (r["sessions"], arm(r))):
        t = r["token_sources"]
        print(f'{r["sessions"]:>8} {arm(r):>8} {r["throughput_tok_s_per_gpu"]:>10.0f} {r["ttft_s"]["p50"]:>9.2f} '
              f'{r["ttft_s"]["p90"]:>7.2f} {100 * t["gpu_cache_share"]:>6.1f} {100 * t["pool_share"]:>6.1f} '
              f'{100 * t["computed_share"]:>6.1f} {100 * t["ceiling"]:>6.1f} {r["verification_errors"]:>6} '
              f'{r["failed_requests"]:>6}')
    print("wrote " + ", ".join(os.path.join(args.out, n) for n in ("throughput.png", "token_sources.png", "ttft.png")))


if __name__ == "__main__":
    main()
