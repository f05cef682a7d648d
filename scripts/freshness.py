#!/usr/bin/python3
"""How fresh every published figure is: the stamp line of each section of docs/benchmarks.md and
docs/reliability.md, and the check that keeps them true (scripts/check-freshness.sh).

scripts/freshness-manifest.json lists, for every section (a marker block of docs/benchmarks.md or
a part of one under its own heading, every `##` section of docs/reliability.md): the raw results
it is drawn from and what it measures (folders and files; `@name` is one of the manifest's groups).
The results record the commit of the code they were measured on and the date
(scripts/bench_machine.py). A section is *stale* when, between that commit and the working tree,
a code file (CODE) in one of its folders, or one of its files named outright, changed; `DIR/**`
counts every file under DIR (data a benchmark reads). Tests beside the code in src/ (`*_test.*`,
`test_*`) are not what a benchmark measures and do not count. A change the manifest lists under
"same_measurement" (a file's content at the measured commit, null where it did not exist yet, and
now) was reviewed as not changing what is measured (a script that only records more about its run,
code that only runs with an option the section's runs do not give); a folder counts as changed
while any of its changed files is not so reviewed.

Each section carries one stamp line, first after its heading, its marker at the end:
    *Measured at `abc1234`, 2026-12-02.* **Stale:** src/master changed since; ... <!-- freshness:ID -->
written by `stamped()`, which the renderers call on what they write and `--write` on the pages.

usage: scripts/freshness.py [--write]
  prints one table (section, measured at, fresh / stale, sources); without --write exits 1 when a
  stamp line is missing or differs from what it would write, or a section has no manifest entry;
  --write rewrites every stamp line.
A commit the local history lacks (a shallow clone) is reported loudly and taken as unknown: its
stamp is kept as it is, never failed on.
"""
import fnmatch
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MANIFEST = os.path.join(ROOT, "scripts", "freshness-manifest.json")
CODE = ("*.cc", "*.h", "*.cu", "*.cuh", "*.proto", "*.py", "CMakeLists.txt", "*.cmake")
TESTS_IN_SRC = ("*_test.*", "test_*")
WORKTREE = "worktree"  # the base of results measured on the working tree as it is (not committed yet)
# The marker ends the line: a line that starts with "<!--" is an HTML block, its text not Markdown.
MARK = re.compile(r"<!-- freshness:([A-Za-z0-9_.-]+) -->$")
# What a stamp means, at the top of every page that carries them.
ABOUT = ("Every section (or part of one) opens with a line that says how fresh its figures are: the commit of "
         "the code they were measured on and the date (*backfilled*: the run did not record its commit; it is "
         "the commit that added those results), and **Stale** where the code it measures (its folders and "
         "files in `scripts/freshness-manifest.json`) changed since, with what to re-run. "
         "`scripts/check-freshness.sh --write` rewrites these lines (the renderers write them too); "
         "`scripts/check-freshness.sh` fails while one is missing or out of date, so a change that makes a "
         "figure stale says so on the page.")


def marker(section_id):
    return f"<!-- freshness:{section_id} -->"


def short(commit):
    return commit[:7] + ("+dirty" if commit.endswith("+dirty") else "")


class Git:
    """The few git questions the check asks, each asked once."""

    def __init__(self, paths):
        self.paths = paths  # every source path of the manifest: the diffs look there only
        self.cache = {}
        self.warnings = []

    def run(self, *args):
        # No optional locks: `git status` must not take the index lock from whoever works here.
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                           env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"))
        return r.returncode, r.stdout

    def once(self, key, fn):
        if key not in self.cache:
            self.cache[key] = fn()
        return self.cache[key]

    def has_commit(self, commit):
        return self.once(("has", commit), lambda: self.run("cat-file", "-e", commit + "^{commit}")[0] == 0)

    def uncommitted(self, path):
        """Whether `path` differs from HEAD in the working tree (or is not tracked at all)."""
        return self.once(("dirty", path), lambda: bool(self.run("status", "--porcelain", "--", path)[1].strip()))

    def first_commit_touching(self, commit, path):
        """The first commit after `commit`, on the way to HEAD, that changed `path`."""
        def find():
            _, out = self.run("rev-list", "--reverse", "--ancestry-path", f"{commit}..HEAD", "--", path)
            return out.split()[0] if out.split() else None
        return self.once(("first", commit, path), find)

    def untracked(self):
        return self.once("untracked", lambda: set(
            self.run("ls-files", "-o", "--exclude-standard", "-z", "--", *self.paths)[1].split("\0")) - {""})

    def changed(self, base):
        """Paths under the manifest's sources that differ between `base` and the working tree."""
        if base == WORKTREE:
            return set()

        def diff():
            _, out = self.run("diff", "--name-only", "--no-renames", "-z", base, "--", *self.paths)
            return (set(out.split("\0")) - {""}) | self.untracked()
        return self.once(("changed", base), diff)

    def blob(self, commit, path):
        def rev():
            code, out = (self.run("hash-object", "--", path) if commit == WORKTREE
                         else self.run("rev-parse", "-q", "--verify", f"{commit}:{path}"))
            return out.strip() if code == 0 else None
        return self.once(("blob", commit, path), rev)


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def expand(entries, groups):
    out = []
    for e in entries:
        for x in (groups[e[1:]] if e.startswith("@") else [e]):
            if x not in out:
                out.append(x)
    return out


def counts(entry, path):
    """Whether a change of `path` counts against the source entry `entry`."""
    if entry.endswith("/**"):
        return path.startswith(entry[:-2])
    if path == entry:
        return True
    if not path.startswith(entry.rstrip("/") + "/"):
        return False
    name = os.path.basename(path)
    if not any(fnmatch.fnmatch(name, p) for p in CODE):
        return False
    return not (path.startswith("src/") and any(fnmatch.fnmatch(name, p) for p in TESTS_IN_SRC))


class Freshness:
    def __init__(self, manifest=None):
        self.manifest = manifest or load_manifest()
        self.groups = self.manifest["groups"]
        paths = set()
        for s in self.manifest["sections"]:
            for e in self.sources(s, all_rows=True):
                paths.add(e[:-3] if e.endswith("/**") else e)
        self.git = Git(sorted(paths))
        self.reviewed = {(r["path"], r["measured"], r["now"]) for r in self.manifest.get("same_measurement", [])}

    def sections(self, doc=None):
        return [s for s in self.manifest["sections"] if doc is None or s["doc"] == doc]

    def sources(self, section, row=None, all_rows=False):
        entries = list(section["sources"])
        per_row = section.get("rows", {}).get("sources", {})
        if all_rows:
            for more in per_row.values():
                entries += more
        elif row is not None:
            entries += per_row.get(row, [])
        return expand(entries, self.groups)

    def measurements(self, section):
        """One per results file (or per row of a file with rows): label, commit, date, backfilled,
        file; "missing" when the file is not in the repository."""
        out = []
        for rel in section["results"]:
            path = os.path.join(ROOT, rel)
            if not os.path.exists(path):
                out.append({"file": rel, "missing": True})
                continue
            with open(path) as f:
                doc = json.load(f)
            rows = section.get("rows")
            items = ([(r[rows["name"]], r) for r in doc[rows["key"]]] if rows else [(os.path.basename(rel), doc)])
            for label, r in items:
                out.append({"file": rel, "label": label, "row": label if rows else None,
                            "commit": r.get("commit") or "unknown", "date": r.get("date", "date unknown"),
                            "backfilled": str(r.get("commit_note", "")).startswith("backfilled")})
        return out

    def base(self, m):
        """The commit to compare the working tree with, or None when it cannot be told."""
        commit = m["commit"]
        if commit == "unknown":
            self.git.warnings.append(f"{m['file']}: {m['label']}: no commit recorded")
            return None
        head = commit.removesuffix("+dirty")
        if not self.git.has_commit(head):
            self.git.warnings.append(f"{m['file']}: commit {head} is not in this clone's history (shallow?)")
            return None
        if not commit.endswith("+dirty"):
            return head
        # Measured on `head` plus changes not committed then: on the working tree, while the results
        # are not committed either; else on the commit that committed them, after `head`.
        if self.git.uncommitted(m["file"]):
            return WORKTREE
        return self.git.first_commit_touching(head, m["file"]) or head

    def stale(self, entries, base):
        """The entries with a change since `base` (those the manifest reviewed as not changing what
        is measured aside)."""
        changed = self.git.changed(base)
        out = []
        for e in entries:
            hits = [p for p in changed if counts(e, p)]
            if hits and all((p, self.git.blob(base, p), self.git.blob(WORKTREE, p)) in self.reviewed for p in hits):
                continue
            if hits:
                out.append(e)
        return out

    def evaluate(self, section):
        """{"measured": [...], "stale": [(entry, [rows])], "unknown": bool, "missing": [files],
        "fallback": dict or None}"""
        ms = self.measurements(section)
        result = {"measured": [m for m in ms if not m.get("missing")],
                  "missing": [m["file"] for m in ms if m.get("missing")], "stale": [], "unknown": False,
                  "fallback": None}
        checks = [(m, m["commit"]) for m in result["measured"]]
        if result["missing"] and section.get("fallback"):
            fb = section["fallback"]
            result["fallback"] = fb
            checks.append(({"file": result["missing"][0], "label": "fallback", "row": None}, fb["commit"]))
        stale = {}
        for m, commit in checks:
            base = self.base(dict(m, commit=commit))
            if base is None:
                result["unknown"] = True
                continue
            for e in self.stale(self.sources(section, row=m.get("row")), base):
                stale.setdefault(e, [])
                if m.get("row") and m["row"] not in stale[e]:
                    stale[e].append(m["row"])
        order = self.sources(section, all_rows=True)
        result["stale"] = sorted(stale.items(), key=lambda kv: order.index(kv[0]))
        return result

    def when(self, section, result):
        """"`abc1234` (backfilled), 2026-12-02", one per distinct measurement."""
        groups = {}
        for m in result["measured"]:
            key = (short(m["commit"]) if m["commit"] != "unknown" else "unknown commit", m["backfilled"], m["date"])
            groups.setdefault(key, []).append(m["label"])
        parts = []
        for (commit, backfilled, date), labels in groups.items():
            text = (f"`{commit}`" if commit != "unknown commit" else commit) + (" (backfilled)" if backfilled else "")
            text += f", {date}"
            if len(groups) > 1:
                if section.get("rows"):
                    many = len(labels) == max(len(v) for v in groups.values()) and len(labels) > 3
                    text += f" ({len(labels)} {section['rows']['plural']})" if many else \
                        " (" + ", ".join(f"`{x}`" for x in labels) + ")"
                else:
                    text += " (" + ", ".join(labels) + ")"
            parts.append(text)
        return "; ".join(parts)

    def stamp(self, section, result=None):
        """The section's stamp line."""
        r = result or self.evaluate(section)
        rerun = section["rerun"] if "`" in section["rerun"] else f"`{section['rerun']}`"
        every = [m["row"] for m in r["measured"]]
        stale = ", ".join(e + (" (" + ", ".join(f"`{x}`" for x in rows) + ")" if rows and rows != every else "")
                          for e, rows in r["stale"])
        if r["missing"]:
            fb = r["fallback"]
            text = (f"*Raw results not in the repo: re-run {rerun} (it commits them as "
                    f"`{r['missing'][0]}`).")
            if fb:
                text += f" The figures below were written by `{short(fb['commit'])}`, {fb['date']}.*"
                text += f" **Stale:** {stale} changed since." if stale else ""
            else:
                text += "*"
            return f"{text} {marker(section['id'])}"
        rows = section.get("rows")
        measured = f"Measured per {rows['plural'].removesuffix('s')}" if rows and len(r["measured"]) > 1 else "Measured"
        text = f"*{measured} at {self.when(section, r)}"
        if r["unknown"]:
            text += "; whether what it measures changed since cannot be told here.*"
        elif stale:
            text += f".* **Stale:** {stale} changed since; re-run with {rerun}."
        else:
            text += "; what it measures has not changed since.*"
        return f"{text} {marker(section['id'])}"

    def stamped(self, text, doc, results=None):
        """`text` (a whole page, or one marker block of it) with the stamp line of every section of
        `doc` it holds written in; returns (text, ids written, ids whose commit is unknown)."""
        lines = text.split("\n")
        known = {s["id"] for s in self.sections(doc)}
        # What the page on disk says, for a section whose commit this clone cannot check: a renderer
        # run here keeps it rather than write "cannot be told".
        path = os.path.join(ROOT, doc)
        on_disk = {}
        if os.path.exists(path):
            with open(path) as f:
                on_disk = {MARK.search(l.rstrip("\n")).group(1): l.rstrip("\n") for l in f if MARK.search(l.rstrip("\n"))}
        lines = [l for l in lines if not (MARK.search(l) and MARK.search(l).group(1) not in known)]
        written, unknown = [], []
        for s in self.sections(doc):
            lo, hi = 0, len(lines)
            if s.get("block"):
                begin, end = f"<!-- {s['block']}:begin -->", f"<!-- {s['block']}:end -->"
                if begin not in lines:
                    continue
                lo = lines.index(begin)
                hi = lines.index(end, lo) if end in lines[lo:] else len(lines)
            heading = next((i for i in range(lo, hi) if lines[i].startswith(s["heading"])), None)
            if heading is None:
                continue
            r = (results or {}).get(s["id"]) or self.evaluate(s)
            at = next((i for i, l in enumerate(lines) if l.endswith(marker(s["id"]))), None)
            if r["unknown"]:
                unknown.append(s["id"])
                if at is not None:
                    continue  # keep what the page says: this clone cannot tell
            line = (r["unknown"] and on_disk.get(s["id"])) or self.stamp(s, r)
            if at is not None:
                lines[at] = line
            elif heading + 1 < len(lines) and lines[heading + 1] == "":
                lines[heading + 2:heading + 2] = [line, ""]
            else:
                lines[heading + 1:heading + 1] = ["", line, ""]
            written.append(s["id"])
        return "\n".join(lines), written, unknown


_shared = None


def stamped(text, doc):
    """`text` with its sections' stamp lines written in (for the renderers; `doc` is the page's
    path from the repository root, e.g. "docs/benchmarks.md")."""
    global _shared
    _shared = _shared or Freshness()
    return _shared.stamped(text, doc)[0]


def coverage(f, doc, text):
    """Sections of the page that no manifest entry stamps."""
    lines = text.split("\n")
    missing = []
    if doc.endswith("benchmarks.md"):
        blocks = {s.get("block") for s in f.sections(doc)}
        for l in lines:
            m = re.match(r"^<!-- ([A-Za-z0-9_-]+):begin -->$", l)
            if m and m.group(1) not in blocks:
                missing.append(f"marker block {m.group(1)}")
    else:
        heads = [s["heading"] for s in f.sections(doc)]
        for l in lines:
            if l.startswith("## ") and not any(l.startswith(h) for h in heads):
                missing.append(f"section '{l}'")
    for s in f.sections(doc):
        if not any(l.startswith(s["heading"]) for l in lines) and not not_measured_yet(s):
            missing.append(f"manifest section {s['id']}: no heading '{s['heading']}' in {doc}")
    return missing


def not_measured_yet(section):
    """A section none of whose results is in the repository yet, with no older page to stand for
    them: its renderer writes no section, so there is nothing to stamp."""
    return not section.get("fallback") and not any(os.path.exists(os.path.join(ROOT, r)) for r in section["results"])


def table(f, results):
    rows = [("section", "measured at", "fresh / stale", "sources")]
    for s in f.sections():
        r = results[s["id"]]
        if r["missing"]:
            when = "no raw results" + (f" (page from {short(r['fallback']['commit'])}, {r['fallback']['date']})"
                                       if r["fallback"] else "")
        else:
            when = re.sub(r"[`*]", "", f.when(s, r))
        if r["unknown"]:
            state = "UNKNOWN (commit not in this clone)"
        elif r["stale"]:
            state = "stale: " + ", ".join(e + (f" ({len(rows_)} {s['rows']['plural'].removesuffix('s') if len(rows_) == 1 else s['rows']['plural']})"
                                               if rows_ else "") for e, rows_ in r["stale"])
        else:
            state = "fresh" if not r["missing"] else "no raw results"
        sources = " ".join(s["sources"]) + (" + each target's fuzz/T.cc and code" if s.get("rows") else "")
        rows.append((s["id"], when, state, sources))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])


def main(argv):
    write = "--write" in argv
    if any(a not in ("--write",) for a in argv):
        sys.exit(__doc__)
    f = Freshness()
    results = {s["id"]: f.evaluate(s) for s in f.sections()}
    table(f, results)
    problems = []
    for doc in dict.fromkeys(s["doc"] for s in f.sections()):
        path = os.path.join(ROOT, doc)
        text = open(path).read()
        problems += [f"{doc}: {m}" for m in coverage(f, doc, text)]
        new, written, _ = f.stamped(text, doc, results)
        for s in f.sections(doc):
            if s["id"] not in written and not results[s["id"]]["unknown"] and not not_measured_yet(s):
                problems.append(f"{doc}: no place for the stamp of {s['id']} (heading '{s['heading']}')")
        if write:
            if new != text:
                with open(path, "w") as out:
                    out.write(new)
                print(f"freshness: rewrote the stamps of {doc}")
            continue
        old_lines = {MARK.search(l).group(1): l for l in text.split("\n") if MARK.search(l)}
        new_lines = {MARK.search(l).group(1): l for l in new.split("\n") if MARK.search(l)}
        for sid in new_lines:
            if sid not in old_lines:
                problems.append(f"{doc}: stamp of {sid} missing")
            elif old_lines[sid] != new_lines[sid]:
                problems.append(f"{doc}: stamp of {sid} out of date:\n    page:   {old_lines[sid]}\n"
                                f"    should: {new_lines[sid]}")
        for sid in old_lines:
            if sid not in new_lines:
                problems.append(f"{doc}: stamp {sid} has no manifest entry")
    for w in dict.fromkeys(f.git.warnings):
        print(f"freshness: WARNING: {w}: taken as unknown, its stamp is kept as it is", file=sys.stderr)
    unknown = [s["id"] for s in f.sections() if results[s["id"]]["unknown"]]
    if unknown:
        print(f"freshness: WARNING: NOT CHECKED, their commit is unknown here: {', '.join(unknown)} "
              "(a shallow clone? `git fetch --unshallow` brings the history the check needs)", file=sys.stderr)
    if problems:
        print("\n".join(f"freshness: {p}" for p in problems), file=sys.stderr)
        if not write:
            print("freshness: run scripts/check-freshness.sh --write (and commit the pages with the change)",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
