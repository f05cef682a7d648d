"""What a benchmark's raw results say of the machine they ran on, the same way in every script:
"<uname -srm>, <N> cores (<CPU model>)".

usage (from a benchmark's Python, run in the repository root):
    sys.path.insert(0, "scripts"); from bench_machine import describe_machine
"""
import os
import subprocess


def describe_machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    uname = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    return f"{uname}, {os.cpu_count()} cores ({cpu})"
