#!/usr/bin/python3
"""What a ctest run skipped, and why, from its JUnit file (ctest --output-junit): one line per
reason with the tests it skipped, so a skip is never silent. A skip of a test matching one of
the MUST_RUN regular expressions fails (exit 1): scripts/test.sh names there the tests that CI,
running as root with every package installed, must run (network namespaces, tmpfs mounts, etcd).

usage: scripts/skipped_tests.py JUNIT.xml [MUST_RUN_REGEX...]
"""
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(output):
    """gtest prints "file:line: Skipped" and then the reason, before "[  SKIPPED ]"."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            reason = []
            for after in lines[i + 1:]:
                if after.startswith("[  SKIPPED ]"):
                    break
                reason.append(after.strip())
            return " ".join(r for r in reason if r) or "no reason given"
    return "no reason given"


def main(argv):
    if len(argv) < 1:
        sys.exit(__doc__)
    must_run = [re.compile(p) for p in argv[1:]]
    by_reason = {}
    for case in ET.parse(argv[0]).getroot().iter("testcase"):
        if case.find("skipped") is None:
            continue
        name = case.get("name").split("  # GetParam()")[0]
        by_reason.setdefault(skip_reason(case.findtext("system-out") or ""), []).append(name)
    total = sum(len(names) for names in by_reason.values())
    print(f"== skipped: {total} test{'s' if total != 1 else ''}")
    for reason, names in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        print(f"  {len(names):4d}  {reason}: {shown}")
    failed = sorted(name for names in by_reason.values() for name in names if any(p.search(name) for p in must_run))
    if failed:
        print("skipped_tests: these tests must run here and were skipped (see their reasons above):\n  "
              + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
