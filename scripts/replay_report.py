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
and report.html, one page with the run table and the three plots inside it (it needs no
network or other file to open), and prints a one-line-per-run table. A single load point is
drawn as bars, not as a line on a sliver of axis. --published draws the published
single-server figures (design.md) beside ours. Every time and throughput here is emulated
(the replay's cost model); token shares are what the real pool held. Needs matplotlib
(Debian: python3-matplotlib).
"""
import base64
import html
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The published single-server figures (design.md, "Published results"), by concurrent sessions.
PUBLISHED = {
    "throughput_tok_s_per_gpu": {56: 31000, 96: 44000, 112: 44000},
    "ttft_p50_s": {96: 2.5, 112: 7.0},  # 96: "median TTFT <= 2.5 s up to 96 sessions"
    "pool_share": {56: 0.16, 112: 0.46},
}

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


def single_point(modes):
    """True when every arm has one load point, all the same: bars, not lines."""
    loads = {load(r) for rs in modes.values() for r in rs}
    return len(loads) == 1


def plot_published(ax, key, scale, label):
    """The published figures of `key` (by sessions) as hollow black markers, labelled."""
    points = sorted(PUBLISHED[key].items())
    ax.scatter([x for x, _ in points], [y * scale for _, y in points], marker="D", facecolors="none",
               edgecolors="black", zorder=4, label=label)


def plot_throughput(modes, out, published=False):
    every = [r for rs in modes.values() for r in rs]
    system = multi_server(every)
    key = "throughput_tok_s" if system else "throughput_tok_s_per_gpu"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if single_point(modes):
        names = sorted(modes)
        ys = [modes[m][0][key] / 1000 for m in names]
        ax.bar(range(len(names)), ys, color=[MODE_STYLE.get(m, (None, m))[0] for m in names])
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([MODE_STYLE.get(m, (None, m))[1] for m in names], fontsize=8)
        for x, y in enumerate(ys):
            ax.annotate(f"{y:.1f}K", (x, y), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
        ax.set_xlabel(f"arm, at {load(every[0]):g} {'requests/s' if every[0].get('arrival_rate', 0) > 0 else 'sessions'}")
    else:
        for mode, rs in sorted(modes.items()):
            color, label = MODE_STYLE.get(mode, (None, mode))
            xs = [load(r) for r in rs]
            ys = [r[key] / 1000 for r in rs]
            ax.plot(xs, ys, marker="o", color=color, label=label)
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.1f}K", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        if published and not system:
            plot_published(ax, "throughput_tok_s_per_gpu", 1 / 1000, "published (one 8-GPU server)")
        ax.set_xlabel(load_axis(every))
        ax.legend()
    ax.set_ylabel(("system throughput, all GPUs" if system else "throughput per GPU") + " (K tok/s, emulated)")
    ax.set_title(("System throughput" if system else "Throughput per GPU") + " (prompt + generated tokens)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=120)
    plt.close(fig)


def plot_token_sources(runs, out, published=False):
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
    if published:  # the published pool share, over our runs at the same load
        marks = [(x, 100 * PUBLISHED["pool_share"][load(r)], g) for x, r, g in zip(xs, runs, gpu)
                 if r.get("arrival_rate", 0) == 0 and load(r) in PUBLISHED["pool_share"] and arm(r) != "no-pool"]
        if marks:  # a share that would end above 100% stops at the top; its value is under the bar
            ax.scatter([m[0] for m in marks], [min(g + share, 100) for _, share, g in marks], marker="D",
                       facecolors="none", edgecolors="black", zorder=4, clip_on=False,
                       label="published pool share (over our GPU share)")
            for x, share, _ in marks:
                labels[x] += f"\npublished\npool {share:.0f}%"
    for x, g, p in zip(xs, gpu, pool):  # inside the bar's top, or just above a bar too short to hold it
        inside = g + p >= 10
        ax.annotate(f"{g + p:.0f}%", (x, g + p), textcoords="offset points", xytext=(0, -12 if inside else 3),
                    ha="center", fontsize=8, color="white" if inside else "black")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("share of prompt tokens (%)")
    ax.set_ylim(0, 100)
    unit = "req/s" if any(r.get("arrival_rate", 0) > 0 for r in runs) else "sessions"
    ax.set_title(f"Where prompt tokens came from\n({unit} / arm; shares measured in the real pool)", fontsize=11)
    # Beside the bars, never over them or the markers.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "token_sources.png"), dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_ttft(modes, out, published=False):
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    every = [r for rs in modes.values() for r in rs]
    if single_point(modes):
        names = sorted(modes)
        width = 0.38
        for k, q in enumerate(("p50", "p90")):
            xs = [i + (k - 0.5) * width for i in range(len(names))]
            ys = [modes[m][0]["ttft_s"][q] for m in names]
            ax.bar(xs, ys, width, color=[MODE_STYLE.get(m, (None, m))[0] for m in names], alpha=1.0 if k == 0 else 0.55,
                   label=q)
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.2f} s", (x, y), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([MODE_STYLE.get(m, (None, m))[1] for m in names], fontsize=8)
        ax.set_xlabel(f"arm (p50 solid, p90 light), at {load(every[0]):g} "
                      f"{'requests/s' if every[0].get('arrival_rate', 0) > 0 else 'sessions'}")
    else:
        for mode, rs in sorted(modes.items()):
            color, label = MODE_STYLE.get(mode, (None, mode))
            xs = [load(r) for r in rs]
            ax.plot(xs, [r["ttft_s"]["p50"] for r in rs], marker="o", color=color, label=f"{label} p50")
            ax.plot(xs, [r["ttft_s"]["p90"] for r in rs], marker="^", linestyle="--", color=color, label=f"{label} p90")
        if published and not multi_server(every):
            plot_published(ax, "ttft_p50_s", 1, "published p50 (96: an upper bound)")
        ax.set_xlabel(load_axis(every))
        ax.legend(fontsize=8)
    ax.set_ylabel("TTFT (s, emulated)")
    ax.set_title("Time to first token")
    values = [r["ttft_s"][q] for rs in modes.values() for r in rs for q in ("p50", "p90") if r["ttft_s"][q] > 0]
    if values and max(values) > 30 * min(values):
        ax.set_yscale("log")  # a collapsed mode would flatten the others
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ttft.png"), dpi=120)
    plt.close(fig)


PLOTS = (("throughput.png", "Throughput"), ("token_sources.png", "Where prompt tokens came from"),
         ("ttft.png", "Time to first token"))


def run_rows(runs):
    """The run table's rows: (sessions or rate, arm, tok/s/GPU, TTFT p50, p90, GPU%, pool%, computed%, ceiling%,
    verification errors, failed requests)."""
    rows = []
    for r in sorted(runs, key=lambda r: (load(r), arm(r))):
        t = r["token_sources"]
        rows.append((f"{load(r):g}", arm(r), f'{r["throughput_tok_s_per_gpu"]:.0f}', f'{r["ttft_s"]["p50"]:.2f}',
                     f'{r["ttft_s"]["p90"]:.2f}', f'{100 * t["gpu_cache_share"]:.1f}', f'{100 * t["pool_share"]:.1f}',
                     f'{100 * t["computed_share"]:.1f}', f'{100 * t["ceiling"]:.1f}', str(r["verification_errors"]),
                     str(r["failed_requests"])))
    return rows


HEADER = ("load", "arm", "tok/s per GPU", "TTFT p50 (s)", "TTFT p90 (s)", "GPU cache %", "pool %", "computed %",
          "ceiling %", "verification errors", "failed requests")


def write_html(runs, sources, out):
    """report.html: the run table and every plot, the PNGs inlined so the page needs nothing else. Each image
    marks itself loaded (data-loaded) and the page counts them (body data-plots-loaded), for a headless check."""
    figures = []
    for name, title in PLOTS:
        with open(os.path.join(out, name), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        figures.append(f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}" '
                       f'onload="plotLoaded(this)"><figcaption>{html.escape(title)}</figcaption></figure>')
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in run_rows(runs))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kvpool replay report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #bbb;padding:3px 8px;text-align:right}}figure{{display:inline-block;margin:1em}}
img{{max-width:640px}}</style>
<script>function plotLoaded(img) {{ if (img.naturalWidth > 0) {{ img.dataset.loaded = "yes";
  document.body.dataset.plotsLoaded = document.querySelectorAll('img[data-loaded="yes"]').length; }} }}</script>
</head><body data-plots-loaded="0">
<h1>kvpool replay report</h1>
<p>From {html.escape(", ".join(sources))}: {len(runs)} run{"s" if len(runs) != 1 else ""}. Throughput and TTFT are
<em>emulated</em> (the replay's cost model); where prompt tokens came from is what the real pool held, and every
restored byte was verified.</p>
<table><tr>{head}</tr>{body}</table>
{"".join(figures)}
</body></html>
"""
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(page)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON files from kvpool replay --json")
    parser.add_argument("--out", default="replay-report", help="folder for the PNG files and report.html")
    parser.add_argument("--published", action="store_true", help="draw the published single-server figures too")
    args = parser.parse_args()
    runs = load_runs(args.results)
    os.makedirs(args.out, exist_ok=True)
    modes = by_mode(runs)
    plot_throughput(modes, args.out, args.published)
    plot_token_sources(runs, args.out, args.published)
    plot_ttft(modes, args.out, args.published)
    write_html(runs, args.results, args.out)
    print(" ".join(f"{h:>10}" for h in ("load", "arm", "tok/s/GPU", "TTFT p50", "p90", "GPU%", "pool%", "comp%",
                                          "ceil%", "verify", "failed")))
    for row in run_rows(runs):
        print(" ".join(f"{c:>10}" for c in row))
    print("wrote " + ", ".join(os.path.join(args.out, n) for n in [p for p, _ in PLOTS] + ["report.html"]))


if __name__ == "__main__":
    main()
