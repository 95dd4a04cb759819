#!/usr/bin/env python3
"""Two builds of one benchmark, side by side in one run: new/old ratios of its JSON figures.

    scripts/compare-benchmarks.py --old /tmp/old/launch_bench --new build/bench/launch_bench \
        --rounds 5 -- --devices vulkan,interp --repetitions 3

Runs the old and the new program alternately, --rounds times each (alternating spreads the
machine's noise over both), with the same arguments (after --). Each program prints JSON lines
with a "bench" key (bench/bench_support.h); lines are matched by their "bench", "device"
and "threads" values, and every numeric field gets the median over the rounds of each side and the ratio
new/old. Prints a table, then one JSON line per matched line. Exits 1 when a program fails, when
a line reports "correct": false, or when --max-ratio is given and a field named by --field
exceeds it.
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare-benchmarks: {' '.join(command)} failed ({done.returncode}):\n"
                 f"{done.stdout}{done.stderr}")
    lines = []
    for text in done.stdout.splitlines():
        if text.startswith("{"):
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            if "bench" in line and "skipped" not in line:
                lines.append(line)
    return lines


def key_of(line):
    """Lines are matched by bench, device and, where there is one, thread count."""
    return (line.get("bench"), line.get("device"), line.get("threads"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the previous build's program")
    parser.add_argument("--new", required=True, help="this build's program")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--field", action="append", default=[],
                        help="a field --max-ratio applies to (repeatable)")
    parser.add_argument("--max-ratio", type=float)
    parser.add_argument("args", nargs="*", help="arguments for both programs (after --)")
    options = parser.parse_args()

    samples = {"old": {}, "new": {}}
    for _ in range(options.rounds):
        for side in ("old", "new"):
            program = options.old if side == "old" else options.new
            for line in run([program] + options.args):
                if line.get("correct") is False:
                    sys.exit(f"compare-benchmarks: {program} reports a wrong result: {line}")
                for field, value in line.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        samples[side].setdefault(key_of(line), {}).setdefault(field, []).append(
                            value)

    failed = False
    print(f"{'bench':<10} {'device':<10} {'field':<24} {'old':>12} {'new':>12} {'new/old':>8}")
    results = []
    for key in sorted(samples["new"].keys() & samples["old"].keys(), key=str):
        old, new = samples["old"][key], samples["new"][key]
        ratios = {}
        for field in sorted(old.keys() & new.keys()):
            a, b = statistics.median(old[field]), statistics.median(new[field])
            ratio = b / a if a else float("nan")
            ratios[field] = {"old": a, "new": b, "ratio": round(ratio, 4)}
            flag = ""
            if options.max_ratio is not None and field in options.field and \
                    ratio > options.max_ratio:
                flag = f"  > {options.max_ratio}"
                failed = True
            device = str(key[1]) + (f"/{key[2]}t" if key[2] is not None else "")
            print(f"{key[0]:<10} {device:<10} {field:<24} {a:>12.4g} {b:>12.4g} "
                  f"{ratio:>8.3f}{flag}")
        results.append({"bench": key[0], "device": key[1], "threads": key[2],
                        "rounds": options.rounds, "fields": ratios})
    for result in results:
        print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
