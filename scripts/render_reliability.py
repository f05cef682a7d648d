#!/usr/bin/env python3
"""Renders docs/reliability.md from the raw results in docs/results/ (the master-HA acceptance
runs, index-cost.json, fuzz-long.json). Every figure is measured; nothing is typed in."""
import json
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RESULTS = os.path.join(ROOT, "docs", "results")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import freshness  # noqa: E402


def load(name):
    path = os.path.join(RESULTS, name)
    return json.load(open(path)) if os.path.exists(path) else None


def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def index_cost_section(data):
    out = ["## What the stores' copy of the index costs a put (*measured*)", "",
           "Every store keeps its segment's index, and the master answers `BatchPutStart` and",
           "`BatchPutEnd` only once the store has applied them (docs/architecture.md, invariant 8):",
           "two more waits on the master→store path per put batch. Two pools side by side in one",
           "run, each a real `kvpool master` + `kvpool store` (1 GiB), one store with its index (the",
           "default), one with `--no-index`; `kvpool bench` (same-host shm) against each, interleaved.",
           f"Command `{data['command']}`, {data['date']}, {data['machine']}. Medians over "
           f"{max(r['rep'] for r in data['runs'])} repetitions.", "",
           "| value | batch | put GB/s, index | put GB/s, no index | ratio | put batch p50 µs, index | no index | get GB/s, index | no index | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    shapes = sorted({(r["value_size"], r["batch"]) for r in data["runs"]})
    for value, batch in shapes:
        def med(arm, field):
            return statistics.median(r[field] for r in data["runs"]
                                     if r["arm"] == arm and r["value_size"] == value and r["batch"] == batch)
        errors = sum(r["errors"] for r in data["runs"] if r["value_size"] == value and r["batch"] == batch)
        pi, pn = med("index", "put_gbps"), med("no-index", "put_gbps")
        out.append(f"| {size(value)} | {batch} | {pi:.2f} | {pn:.2f} | {pi / pn:.2f} | "
                   f"{med('index', 'put_batch_p50_us'):.0f} | {med('no-index', 'put_batch_p50_us'):.0f} | "
                   f"{med('index', 'get_gbps'):.2f} | {med('no-index', 'get_gbps'):.2f} | {errors} |")
    out.append("")
    return out


def replay_rows(row):
    """The replay's outcome, one row per figure; row(label, f) renders f(arm) for every arm."""
    row("pool share of prompt tokens", lambda a: f"{100 * a['token_sources']['pool_share']:.1f}%")
    row("reuse (of the ceiling)", lambda a: f"{100 * a['token_sources']['reuse']:.1f}% "
                                            f"({100 * a['token_sources']['reuse_of_ceiling']:.1f}%)")
    row("requests / failed", lambda a: f"{a['requests']} / {a['failed_requests']}")
    row("verification errors", lambda a: f"{a['verification_errors']}")
    row("failed saves", lambda a: f"{a['save_failures']}")


def restart_section(data):
    arms = {a["arm"]: a for a in data["arms"]}
    calm, hit = arms["undisturbed"], arms["killed"]
    kept = hit["objects_after_rejoin"] / hit["objects_before_kill"] if hit["objects_before_kill"] else 0
    rebuild_s = max((s for _, s in hit["rejoins"]), default=0)
    out = ["## A lone master killed and restarted (*measured*)", "",
           f"`{data['replay']}` (GPU prefix caches small enough that the pool carries the reuse) against "
           "a real `kvpool master` and 2 `kvpool store` processes (1 GiB",
           f"each); in one arm the master is killed with `kill -9` {data['kill_after_s']} s in and started again",
           "at once on the same address, with no standby; the other arm is the same replay, same seed,",
           f"undisturbed. Command `{data['command']}`, {data['date']}, {data['machine']}.",
           "Token shares are the replay's (*emulated* time, real KV bytes through the real pool).", "",
           "| | undisturbed | master killed and restarted |", "|---|---:|---:|"]
    def row(label, f):
        out.append(f"| {label} | {f(calm)} | {f(hit)} |")
    replay_rows(row)
    out += ["",
            f"Objects in the pool just before the kill: {hit['objects_before_kill']}; served by the restarted "
            f"master once both stores rejoined: {hit['objects_after_rejoin']} ({100 * kept:.1f}%). The stores "
            f"were back {hit['back_after_s']:.2f} s after the kill (their next heartbeat finds a master that does "
            f"not know their segment; they rejoin with their index); the longest rebuild took {rebuild_s:.3f} s.",
            "",
            f"The restart still costs {100 * (calm['token_sources']['pool_share'] - hit['token_sources']['pool_share']):.1f} "
            "points of pool share: a lone master has no standby and no takeover grace, so lookups sent while it "
            "was down fail at once, and those that reach it before the stores have rejoined miss; both are "
            "computed instead. With standbys (the section above) a call waits for the new leader instead.", ""]
    return out


def failed_failovers(arm):
    """The kills of an arm after which no master was seen to lead in time, as sentences. Older
    results have no "elected" field: there, a new leader of "none" is such a kill (the wait ran
    out), whatever the time recorded beside it."""
    failed = []
    for k in arm["events"]:
        after = k.get("new_leader", k.get("leader_after"))
        if k.get("elected") is False or after in ("none", "unknown"):
            if "failure" in k:
                what = k["failure"]
            elif "killed" in k:
                what = f"master {k['killed']} killed, no other master was seen to lead within the wait"
            else:
                what = "etcd killed, no master was seen to lead within the wait after it was back"
            if after == "unknown":
                what += " (a master's `/metrics` did not answer, so it could not be told)"
            what += (f"; each master's `/metrics` last said: {k['probed']}" if k.get("probed") else
                     "; what each master said was not recorded")
            failed.append(f"kill {k['kill']}: {what}")
        if k.get("leader_while_down") == "unknown":
            failed.append(f"kill {k['kill']}: a master's `/metrics` did not answer while etcd was down, so "
                          f"whether a master still led then cannot be told ({k.get('probed_while_down', '')})")
    return failed


def failover_section(data):
    arms = {a["arm"]: a for a in data["arms"]}
    calm, kills, etcd = arms["undisturbed"], arms["leader-kills"], arms["etcd-kills"]
    failed = {name: failed_failovers(arms[name]) for name in ("leader-kills", "etcd-kills")}
    # The times below are of the failovers that completed: a failed one's wait ran out, and its
    # time is the wait's bound, not a failover's.
    done = [k for k in kills["events"] if k.get("elected") is not False and k.get("new_leader") not in ("none", "unknown")]
    etcd_done = [k for k in etcd["events"]
                 if k.get("elected") is not False and k.get("leader_after") not in ("none", "unknown")]
    elected = [k["elected_after_s"] for k in done]
    rejoined = [k["rejoined_after_s"] for k in done if k.get("rejoined_after_s") is not None]
    kept = [k["objects_after"] / k["objects_before"] for k in done if k["objects_before"]]
    back = [k["leads_after_back_s"] for k in etcd_done]
    etcd_kept = [k["objects_after"] / k["objects_before"] for k in etcd_done if k["objects_before"]]
    probed = [k for k in etcd["events"] if "leader_while_down" in k]
    same_leader = sum(k["leader_before"] == k["leader_after"] for k in etcd_done)
    led_while_down = sum(k["leader_while_down"] not in ("none", "unknown") for k in probed)
    unknown_while_down = sum(k["leader_while_down"] == "unknown" for k in probed)
    out = ["## The leader killed again and again, and etcd too (*measured*)", "",
           f"A real etcd, {data['masters']} `kvpool master --etcd` processes for one part (leader lease "
           f"{data['leader_ttl_s']} s, takeover grace {data['takeover_grace_ms']} ms) and {data['stores']} "
           f"`kvpool store --etcd` processes (1 GiB each), under `{data['replay']}`: GPU prefix caches of "
           "200,000 tokens, so the pool carries most of the reuse. Three arms, each on a fresh deployment, "
           "same replay, same seed: undisturbed; the leader killed with `kill -9` every "
           f"{data['interval_s']} s (and started again at once as a standby); etcd itself killed with "
           f"`kill -9` every {data['interval_s']} s, kept down {data['etcd_down_s']} s (longer than the lease) "
           f"and started again on its data. Command `{data['command']}`, {data['date']}, {data['machine']}. "
           "Token shares are the replay's (*emulated* time, real KV bytes through the real pool).", "",
           "| | undisturbed | leader killed | etcd killed |", "|---|---:|---:|---:|"]
    if failed["leader-kills"] or failed["etcd-kills"]:  # first thing under the heading
        out[2:2] = ["**FAILED: a failover did not complete.** " + " ".join(
                        f"{'Leader' if name == 'leader-kills' else 'etcd'} kills: " + "; ".join(lines) + "."
                        for name, lines in failed.items() if lines)
                    + " The medians and maxima below are of the failovers that completed.", ""]
    def row(label, f):
        out.append(f"| {label} | {f(calm)} | {f(kills)} | {f(etcd)} |")
    row("kills", lambda a: f"{len(a['events'])}")
    row("failed kills (no master seen to lead in time, or a probe unanswered)", lambda a: f"{len(failed_failovers(a))}"
        + ("" if not failed_failovers(a) else " **FAILED**"))
    replay_rows(row)
    row("longest stall behind the replay's pace (wall s)", lambda a: f"{a['max_lag_s']:.2f}")

    def stats(values, low=False):
        if not values:
            return "– | –"
        return (f"{statistics.median(values):.3f} | min {min(values):.3f}" if low else
                f"{statistics.median(values):.2f} | {max(values):.2f}")
    out += ["", f"| leader killed ({len(done)} failovers completed of {len(kills['events'])}) | median | max |",
            "|---|---:|---:|",
            f"| another master leads, after the kill (s) | {stats(elected)} |",
            f"| both stores rejoined it, after the kill (s) | {stats(rejoined)} |",
            f"| objects after / objects just before | {stats(kept, low=True)} |",
            "", f"| etcd killed ({len(etcd_done)} failovers completed of {len(etcd['events'])}) | median | max |",
            "|---|---:|---:|",
            f"| a master leads again, after etcd is back (s) | {stats(back)} |",
            f"| objects after / objects just before | {stats(etcd_kept, low=True)} |",
            ""]
    if probed and all("probed_while_down" in k for k in probed):
        down = (f"While etcd was down past the lease, {led_while_down} of {len(probed)} probes found a master "
                f"still leading and {unknown_while_down} could not tell (a master's `/metrics` did not answer, "
                "asked again for a second); each master's `/metrics` is read once the lease has run out.")
    else:
        down = (f"While etcd was down past the lease, {led_while_down} of {len(probed)} probes found a master "
                "still leading (each master's `/metrics` is read once the lease has run out; this run counted a "
                "master whose `/metrics` did not answer as not leading, so it cannot tell a silent master from "
                "a standby).")
    out += [down + f" The master that led before etcd went away led again after it in {same_leader} of "
            f"{len(etcd_done)} completed failovers. The token shares match across arms because a pool call that "
            "meets a failover waits for the new leader within its deadline instead of missing: the emulated clock "
            "does not see the wait, the stall row does (real time the replay fell behind its pace). Objects can "
            "differ across a kill because the replay keeps putting and evicting meanwhile.", ""]
    return out


def fuzz_section(data):
    targets = data["targets"]
    runs = sorted({(t["date"], t["machine"]) for t in targets})
    parallel = [t for t in targets if t.get("workers", 1) > 1]
    out = ["## Fuzzing: the long run (*measured*)", "",
           f"Every target of `fuzz/` ({data['fuzzer']}) from its seed corpus, up to "
           f"{data['runs_target']:,} inputs each, bounded in time as the table says; one process per target "
           "unless the workers column says more. "
           f"Command `{data['command']} [TARGET...]`; "
           + "; ".join(f"{date} on {machine}" for date, machine in runs)
           + ". `scripts/test.sh` runs each target for 15 s on every CI run.", ""]
    if parallel:
        out[-2] += (" A target with several workers ran on another machine (`scripts/fuzz-bundle.sh`, then "
                    "`scripts/fuzz-parallel.sh` there, recorded with `FROM_PARALLEL=dir "
                    f"{data['command']}`): that many libFuzzer processes at once, sharing one corpus, "
                    "with the same options; its inputs are summed over the workers, its seconds are wall "
                    "time, so its inputs/s is all workers together, and its corpus is the shared one "
                    "(each worker keeps what is new to it, so it is larger than one process's).")
    out += ["| target | date | workers | inputs | seconds (bound) | inputs/s | coverage (edges) | corpus | crashes, leaks, hangs |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for t in targets:
        calls = t.get("calls", [])
        workers = " + ".join(str(c["workers"]) for c in calls) if len(calls) > 1 else str(t.get("workers", 1))
        out.append(f"| `{t['target']}` | {t['date']} | {workers} | {t['inputs']:,} | {t['seconds']:,.0f} ({t['max_seconds']:,}) | "
                   f"{t['inputs'] / max(t['seconds'], 1e-9):,.0f} | "
                   f"{t['cov']:,} | {t['corpus']:,} | {'0' if t['ok'] else 'FOUND (see the run log)'} |")
    for t in parallel:
        calls = t.get("calls", [])
        if len(calls) > 1:
            where = "that machine" if len({c.get("machine") for c in calls}) == 1 else "these machines"
            out += ["", f"`{t['target']}` ran in {len(calls)} calls on {where}, each continuing the corpus of "
                    "the last: " + "; ".join(f"{c['workers']} worker{'s' if c['workers'] != 1 else ''}, {c['inputs']:,} inputs in {c['seconds']:,.0f} s"
                                             + (f" on {c['machine']}" if where == "these machines" else "")
                                             for c in calls) + "."]
    short = [t["target"] for t in targets if t["inputs"] < data["runs_target"]]
    out.append("")
    if short:
        out += [f"Stopped by the time bound before {data['runs_target']:,} inputs: "
                + ", ".join(f"`{t}`" for t in short) + ".", ""]
    never = sorted(set(os.listdir(os.path.join(ROOT, "fuzz", "corpus"))) - {t["target"] for t in targets})
    if never:
        out += ["No long run yet: " + ", ".join(f"`{t}`" for t in never) + ".", ""]
    return out


def checksum_cost_section(data):
    first = data["runs"][0]
    rounds = data.get("rounds", 1)
    out = ["## End-to-end checksums: what the check costs a restore (*measured*)", "",
           f"One pipeline stage's share of a {first['tokens']:,}-token history ({first['history_bytes'] / 1e9:.2f} GB) "
           "restored by the "
           "connector's `RestoreEngine` from a real storage service (an embedded pool reached through the same "
           "client paths as a separate process) into a paged cache, on the GPU and in host memory, each path with "
           "and without the checksum check; the four modes take turns within each repetition. *mapped*: the "
           "unpack reads the store's segment mapped in place (the default on one host); *staged*: every window is "
           "first read into a staging buffer (what a remote replica takes). With checks, every object is hashed "
           "(xxh3-64) and compared with its writer's checksum as the engine does in service: on the GPU, by the "
           "GPU in device memory after the DMA (a kernel bit-exact with the library's xxh3); in host memory, "
           "staged objects by the transport as they land in staging, mapped ones on helper threads while the "
           f"unpack copies them. Command `{data['command']}`, {data['date']}, {data['machine']}. Medians of "
           f"{rounds * first['reps']} repetitions ({rounds} rounds of {first['reps']}, pooled); every restored byte "
           "compared with what was put, and in every round each checking mode stopped its restore right before an "
           "object with a bit flipped in the store.", ""]
    previous = {(p["device"], p["workers"], p["path"]): p["cost_pct"] for p in data.get("previous", {}).get("costs", [])}
    before = f" | cost before ({data['previous']['date']})" if previous else ""
    out += ["| device | workers | path | GB/s with checks | GB/s without | cost | cost per round" + before +
            " | reference GB/s |",
            "|---|---:|---|---:|---:|---:|---|" + ("---:|" if previous else "") + "---:|"]
    groups = {}
    for run in data["runs"]:
        groups.setdefault((run["device"], run["workers"]), []).append(run)
    for (device, workers), runs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "gpu", kv[0][1])):
        gb = runs[0]["history_bytes"] / 1e6
        ref = f"{statistics.median(r['reference_gbps'] for r in runs):.1f} ({runs[0]['reference']})"
        for path in ("mapped", "staged"):
            pooled, per_round = {True: [], False: []}, []
            for run in runs:
                modes = {m["checksums"]: m for m in run["modes"] if m["path"] == path}
                per_round.append(100 * (modes[True]["restore_ms"] / modes[False]["restore_ms"] - 1))
                for on in (True, False):
                    pooled[on] += modes[on]["restore_ms_runs"]
            on, off = statistics.median(pooled[True]), statistics.median(pooled[False])
            was = previous.get((device, workers, path))
            was_cell = (f" | {was:+.1f}%" if was is not None else " | –") if previous else ""
            rounds_cell = ", ".join(f"{c:+.1f}%" for c in per_round)
            out.append(f"| {device.upper()} | {workers} | {path} | {gb / on:.1f} | {gb / off:.1f} | "
                       f"{100 * (on / off - 1):+.1f}% | {rounds_cell}{was_cell} | {ref} |")
    out += ["", "Cost = restore time with checks / without − 1 (negative: inside the run-to-run noise); the rounds "
            "show how far one run of 9 moves on this shared machine. The target is ≤ 5%."]
    if previous:
        out[-1] += (f" *Cost before*: the same benchmark on {data['previous']['date']}, {data['previous']['how']} "
                    "(another run, so compare only its costs, not its GB/s).")
    out[-1] += (" On the GPU the check reads no byte from host memory: the hash runs on a second stream over "
                "what the DMA brought into the device bounce buffer, beside the next copy. In host memory the "
                "staged check hashes each piece as it lands, but the mapped check must read every byte the unpack "
                "reads once more from memory; with 8 workers the copies already share the memory bandwidth, which "
                "keeps that check above the target."
                " That a flipped bit is caught, never served, is shown by tests: `client_checksum_test` (a read, "
                "over shm and tcp), the restore engine's corruption tests (mapped and staged), `gpu_checksum_test` "
                "(the GPU's hash against the library's, bit for bit), restore_bench itself and "
                "`DeploymentTest.BytesThatWentBadInTheStoreAreComputedInsteadOfRestored` (a whole deployment).")
    out.append("")
    return out


def soak_corruptions(data):
    """What the soak's corrupt faults did: (the fault table's cell, the checksum row's "after ..."). A
    corruption is injected only by a SIGUSR2 that flipped bits (one that finds no complete object in
    the store's segment flips none). Older results (no "corruptions_injected") recorded only how many
    signals the stores answered, so they cannot tell how many flipped bits; they say so."""
    if "corruptions_injected" in data:
        sent, injected, bits = data["corrupt_signals_sent"], data["corruptions_injected"], data["bits_flipped"]
        none, silent = data["corrupt_signals_flipped_none"], data["corrupt_signals_unanswered"]
        cell = (f"{sent} signals: {injected} injected a corruption ({bits} bits flipped, one each in a randomly "
                f"picked object), {none} flipped nothing (no complete object in the segment), {silent} unanswered")
        return cell, (f"after {injected} corruptions injected, {bits} bits flipped in all; an object may have been "
                      "picked twice")
    sent = sum(1 for f in data["faults"] if f["fault"] == "corrupt")
    answered = data["corrupt_signals_applied"]
    return (f"{sent} signals ({answered} answered by the store; how many bits each flipped was not recorded, "
            "and a signal that finds no complete object in the segment flips none)",
            f"after {answered} corrupt signals answered by a store; this run did not record how many bits "
            "each flipped, so how many corruptions were injected is unknown")


def soak_section(data):
    r = data["replay_result"]
    counts = {}
    for f in data["faults"]:
        counts[f["fault"]] = counts.get(f["fault"], 0) + 1
    corrupt_cell, corrupt_after = soak_corruptions(data)
    # Older results have no "throttle": soak.sh then shaped only the store's end, at 8 Mbit/s.
    shaped = data.get("throttle", {}).get(
        "shaped", "the store's outbound traffic only (a tc tbf on the store's end of its veth; what it "
                  "receives was not shaped)")
    # Older results predate the SSD tier, UCX and retention hints in the soak: none of them ran.
    ssd = data.get("store_ssd_mib", 0)
    extras = (f", each with an SSD tier of {ssd} MiB under its segment (a restarted store brings back what its "
              "file holds)" if ssd else ", no SSD tier")
    if ssd and "ssd_objects_max" in data:
        extras += (f"; the masters' high watermark at {data['high_watermark']:g}, so the stores demote: their tiers "
                   f"held up to {data['ssd_objects_max']:,} objects at once")
    extras += ("; the stores serve UCX (over tcp) and the replay moves its bytes over it"
               if data.get("transport") == "ucx" else "; bytes over kvpool's tcp transport")
    extras += ("; the replay's router sends retention hints" if data.get("retention") == "session"
               else "; no retention hints")
    out = ["## Fault-injection soak (*measured*)", "",
           f"A real etcd, {data['masters']} `kvpool master --etcd` (HA) and {data['stores']} `kvpool store --etcd` "
           f"({data['store_memory_mib']} MiB each{extras}), every store in its own network namespace behind a veth "
           f"on one bridge, under `{data['replay']}`, while a fault injector (seed {data['seed']}) broke something every "
           f"{data['fault_interval_s']} s. Command `{data['command']}` (as root), {data['date']}, {data['machine']}. "
           "Token shares are the replay's (*emulated* time, real KV bytes through the real pool). The faults: "
           "*store-kill* `kill -9` a store and start it again (a new, empty segment"
           + ("; its SSD tier comes back from its file" if ssd else "") + "); *store-stop* `SIGSTOP` a "
           "store past the heartbeat TTL, then `SIGCONT`; *master-kill* `kill -9` the leading master and start "
           "it again as a standby; *link-down* the store's port on the bridge down, then up; *throttle* "
           f"{data.get('throttle', {}).get('rate_mbit', 8)} Mbit/s on {shaped}, then lifted; *corrupt* `SIGUSR2` "
           "to a store, whose fault hook flips one bit in each of a fixed number of randomly picked objects "
           "of its segment (none when the segment holds no complete object).", "",
           "| fault | times |", "|---|---|"]
    for name in ("store-kill", "store-stop", "master-kill", "link-down", "throttle"):
        out.append(f"| {name} | {counts.get(name, 0)} |")
    out.append(f"| corrupt | {corrupt_cell} |")
    sources = r.get("token_sources") or {}
    out += ["", "| check | result |", "|---|---|",
            f"| wrong bytes served (replay verification errors) | {r['verification_errors']} |",
            f"| requests completed / failed | {r['requests']} / {r['failed_requests']} |",
            f"| replay ended in time (no hang) | {'yes' if not data['hung'] and data['replay_exit_code'] == 0 else 'NO'} |",
            f"| corrupt objects caught by checksum (restores that fell back) | {r.get('restore_corrupt_objects', 0)} "
            f"({corrupt_after}) |",
            f"| restore errors / failed saves (fell back to computing / not cached) | {r.get('restore_errors')} / "
            f"{r.get('save_failures')} |",
            f"| pool share of prompt tokens, reuse | {100 * sources.get('pool_share', 0):.1f}%, "
            f"{100 * sources.get('reuse', 0):.1f}% |",
            f"| capacity exceeded (of {data['samples']} samples of every segment) | {data['capacity_violations']} "
            f"(fullest segment {100 * data['max_fill']:.0f}%) |",
            "| peak RSS, MiB (bound) | " + ", ".join(
                f"{role} {mib}" + (f" ({data['rss_bounds_mib'][role]})" if role in data["rss_bounds_mib"] else "")
                for role, mib in data["peak_rss_mib"].items()) + " |",
            f"| every check passed | {'yes' if all(data['checks'].values()) else 'NO: ' + ', '.join(k for k, v in data['checks'].items() if not v)} |",
            ""]
    return out


def ci_time_section(data):
    """What CI's `.ci/run` costs, stage by stage, against the 90-minute limit and the 45-minute target."""
    stages = data["test_sh"]["stages"]
    total = data["total_seconds"]
    out = ["## CI time (*measured*)", "",
           f"`.ci/run` (`scripts/install-deps.sh`, then `scripts/test.sh`) on a fresh clone of `{data['commit'][:7]}` "
           f"in a temporary folder, every build from nothing; command `{data['command']}`, {data['date']}, "
           f"{data['machine']}. These 2-core machines vary about 2x between runs, so the stages compare only "
           "within one run; CI stops a run at 90 minutes, and the suite keeps under 45 to leave room to grow. "
           "install-deps.sh found its packages installed here; on a fresh CI machine it also downloads them.", "",
           "| stage | seconds | minutes | share |", "|---|---:|---:|---:|",
           f"| install-deps.sh (apt) | {data['install_deps_seconds']:,} | {data['install_deps_seconds'] / 60:.1f} | "
           f"{100 * data['install_deps_seconds'] / total:.0f}% |"]
    for s in stages:
        out.append(f"| {s['stage']} | {s['seconds']:,} | {s['seconds'] / 60:.1f} | {100 * s['seconds'] / total:.0f}% |")
    unstaged = data["test_sh"]["seconds"] - sum(s["seconds"] for s in stages)
    out.append(f"| configure and the rest of test.sh | {unstaged:,} | {unstaged / 60:.1f} | {100 * unstaged / total:.0f}% |")
    out += [f"| **total** | **{total:,}** | **{total / 60:.1f}** | |", "",
            f"{total / 60:.1f} minutes on this machine"
            + ("" if data["test_sh"]["passed"] else "; **test.sh failed in this run**") + "."]
    # The target is CI's own time, so the verdict is on CI's runs, not on this machine's.
    runs = data.get("ci_runs", [])
    if runs:
        out += ["", f"CI's own runs of `.ci/run`, {data['ci_runs_note']}:", "",
                "| commit | seconds | minutes | against the 45-minute target | note |", "|---|---:|---:|---|---|"]
        for r in runs:
            verdict = "within" if r["seconds"] <= 45 * 60 else "**above**"
            out.append(f"| `{r['commit']}` | {r['seconds']:,} | {r['seconds'] / 60:.1f} | {verdict} | {r['note']} |")
    return out + [""]


def main():
    lines = ["# Reliability", "",
             "Rendered by `scripts/render_reliability.py` from the raw results in `docs/results/`.", "",
             freshness.ABOUT, ""]
    cost = load("index-cost.json")
    restart = load("master-restart.json")
    failover = load("master-failover.json")
    fuzz = load("fuzz-long.json")
    checksums = load("checksum-cost.json")
    soak = load("soak.json")
    if failover:
        lines += failover_section(failover)
    if restart:
        lines += restart_section(restart)
    if cost:
        lines += index_cost_section(cost)
    if checksums:
        lines += checksum_cost_section(checksums)
    if soak:
        lines += soak_section(soak)
    if fuzz:
        lines += fuzz_section(fuzz)
    ci_time = load("ci-time.json")
    if ci_time:
        lines += ci_time_section(ci_time)
    page = freshness.stamped("\n".join(lines), "docs/reliability.md")  # every section's stamp line
    open(os.path.join(ROOT, "docs", "reliability.md"), "w").write(page)


if __name__ == "__main__":
    sys.exit(main())
