#!/usr/bin/env python3
"""Prints bench/scale.sh's tables: one per frequency, a column per flamebpf run, against issue 35's
targets.

Usage: report.py RUNS_DIR INTERVAL
RUNS_DIR holds one directory per run, each with `meta` (role: candidate or baseline, label,
frequency, minutes: one `key value` a line), `time` (/usr/bin/time -f '%U %S %M %e'), `poll`
(`anon_kib N` and `map_bytes N` lines), `log` (flamebpf's stderr) and `dumps/` (its --output-dir).
"""
import datetime
import json
import os
import re
import statistics
import sys

MIB = 1 << 20
# Steady CPU targets by frequency, % of one CPU (issue 35); other frequencies have none.
STEADY_TARGETS = {99: 1.0, 19: 0.5}
PEAK_RSS_TARGET_MIB = 64
ANON_TARGET_MIB = 32
NAMED_TARGET = 98.0
OUR_PREFIX = "scale-"
JVM_PREFIX = "scale-jvm-"
# A frame flamebpf could not name: `[unknown]` (and its kin), a bare address, or the
# `file+0xoffset` of code whose symbols never arrived (docs/native-names.md).
UNNAMED = re.compile(r"^\[unknown[^\]]*\]$|^0x[0-9a-f]+$|\+0x[0-9a-f]+$")


def target_kind(name):
    if name.startswith(OUR_PREFIX):
        return "ours"
    return "host" if name == "host" else "others"


def read_meta(run_dir):
    meta = {}
    with open(os.path.join(run_dir, "meta")) as lines:
        for line in lines:
            key, _, value = line.rstrip("\n").partition(" ")
            meta[key] = value
    return meta


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def folded_samples(path):
    """(samples, samples with every frame named) of one folded file."""
    total = named = 0
    with open(path, errors="replace") as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            total += int(count)
            if not any(UNNAMED.search(frame) for frame in stack.split(";")):
                named += int(count)
    return total, named


def jvm_naming(dumps):
    """Samples and named samples over every JVM target's windows, and per JVM whether it was named
    within one interval of its first sample: the window of its first sample, or the one right
    after it, has at least NAMED_TARGET % of its samples named."""
    total = named = 0
    in_time = {}
    for target in sorted(os.listdir(dumps)):
        target_dir = os.path.join(dumps, target)
        if not target.startswith(JVM_PREFIX) or not os.path.isdir(target_dir):
            continue
        windows = []
        for name in sorted(os.listdir(target_dir)):
            path = os.path.join(target_dir, name)
            if not name.endswith(".folded") or os.path.islink(path):
                continue
            samples, named_samples = folded_samples(path)
            total += samples
            named += named_samples
            if samples:
                windows.append(100.0 * named_samples / samples)
        in_time[target] = any(share >= NAMED_TARGET for share in windows[:2])
    return total, named, in_time


def analyse(run_dir, interval):
    meta = read_meta(run_dir)
    result = {"label": meta["label"], "role": meta["role"], "frequency": int(meta["frequency"])}
    with open(os.path.join(run_dir, "time")) as lines:
        # GNU time puts "Command exited with non-zero status N" first when it is not 0.
        user, system, rss_kib, elapsed = lines.read().split("\n")[-2].split()[:4]
    cpu = float(user) + float(system)
    result["whole"] = 100 * cpu / float(elapsed)
    result["peak_rss"] = int(rss_kib) * 1024 / MIB

    intervals = []
    with open(os.path.join(run_dir, "dumps", "flamebpf-stats.jsonl")) as lines:
        for line in lines:
            stats = json.loads(line)
            seconds = (parse_time(stats["end"]) - parse_time(stats["start"])).total_seconds()
            intervals.append((seconds, stats))
    # The stats file counts CPU time from sampling's start; what came before (loading the BPF
    # programs, finding the targets) is the rest of the whole run's.
    before = cpu - sum(s["flamebpf"]["interval_cpu_seconds"] for _, s in intervals)
    # The start: the intervals that begin within one interval's length of sampling's start.
    # Windows end on the clock's multiples of the interval, so the first may last 3 s or 29: the
    # work of meeting the processes spills into the next when it is short.
    began = parse_time(intervals[0][1]["start"])
    start = [(seconds, s) for seconds, s in intervals
             if (parse_time(s["start"]) - began).total_seconds() < interval]
    result["startup"] = (before, sum(s["flamebpf"]["interval_cpu_seconds"] for _, s in start),
                         sum(seconds for seconds, _ in start))
    # Steady: every interval after the start but a short last one (it holds the final writes).
    steady = intervals[len(start):]
    if steady and steady[-1][0] < interval - 1:
        steady = steady[:-1]
    if steady:
        shares = [100 * s["flamebpf"]["interval_cpu_seconds"] / seconds for seconds, s in steady]
        result["steady"] = (
            100 * sum(s["flamebpf"]["interval_cpu_seconds"] for _, s in steady)
            / sum(seconds for seconds, _ in steady),
            min(shares),
            max(shares),
        )
        result["samples"] = statistics.mean(s["samples"] for _, s in steady)
        # Whose samples they were: the benchmark's containers, the host outside containers, or
        # containers of something else that ran meanwhile (they cost flamebpf too).
        by_kind = {"ours": [], "host": [], "others": []}
        for _, stats in steady:
            counts = {kind: 0 for kind in by_kind}
            for name, target in stats["targets"].items():
                counts[target_kind(name)] += target["samples"]
            for kind, count in counts.items():
                by_kind[kind].append(count)
        result["samples_by_kind"] = {kind: statistics.mean(v) for kind, v in by_kind.items()}
    result["foreign"] = sorted({name for _, stats in intervals for name in stats["targets"]
                                if target_kind(name) == "others"})
    result["anon_stats"] = max(s["flamebpf"]["rss_anon_bytes"] for _, s in intervals) / MIB
    # What the symbolizer holds (issue 35's largest part of the anonymous memory).
    result["symbols"] = max(s["occupancy"]["symbol_bytes"] for _, s in intervals) / MIB
    result["elf_files"] = max(s["occupancy"]["elf_files"] for _, s in intervals)
    jit = sum(s["unnamed_frames"]["jit"] for _, s in intervals)
    jit_unnamed = sum(s["unnamed_frames"]["jit_unnamed"] for _, s in intervals)
    result["jit_unnamed"] = 100 * jit_unnamed / jit if jit else None

    polled = {"anon_kib": 0, "map_bytes": 0}
    with open(os.path.join(run_dir, "poll")) as lines:
        for line in lines:
            key, _, value = line.partition(" ")
            if key in polled and value.strip().isdigit():
                polled[key] = max(polled[key], int(value))
    result["anon_polled"] = polled["anon_kib"] * 1024 / MIB
    result["maps"] = polled["map_bytes"] / MIB

    dumps = os.path.join(run_dir, "dumps")
    result["targets"] = sum(
        1 for name in os.listdir(dumps) if os.path.isdir(os.path.join(dumps, name)))
    total, named, in_time = jvm_naming(dumps)
    result["jvm_samples"] = total
    result["named"] = 100 * named / total if total else None
    result["jvms_seen"] = len(in_time)
    result["late_jvms"] = sorted(name for name, ok in in_time.items() if not ok)
    with open(os.path.join(run_dir, "log"), errors="replace") as lines:
        result["warnings"] = sum(1 for line in lines if "warning" in line or "error" in line)
    return result


def verdict(value, limit, at_most=True):
    if limit is None or value is None:
        return ""
    return " met" if (value <= limit if at_most else value >= limit) else " NOT met"


def table(frequency, runs, jvms, minutes, interval):
    steady_target = STEADY_TARGETS.get(frequency)
    rows = []

    def row(name, cells, target="", ratio_of=None):
        if ratio_of and len(ratio_of) == 2 and all(ratio_of) and ratio_of[1]:
            cells = cells + [f"{ratio_of[0] / ratio_of[1]:.2f}x"]
        elif len(runs) == 2:
            cells = cells + [""]
        rows.append([name] + cells + [target])

    def steady_cell(run):
        if "steady" not in run:
            return "n/a (no whole interval)"
        mean, low, high = run["steady"]
        return f"{mean:.2f}{verdict(mean, steady_target)} [{low:.2f}-{high:.2f}]"

    row("steady CPU, % of one CPU [per interval]", [steady_cell(r) for r in runs],
        f"<= {steady_target} %" if steady_target else "",
        [r.get("steady", (None,))[0] for r in runs])
    row(f"start-up CPU: before sampling + first {interval} s",
        [f"{r['startup'][0]:.2f} s + {r['startup'][1]:.2f} s (in {r['startup'][2]:.0f} s)"
         for r in runs], "", [r["startup"][0] + r["startup"][1] for r in runs])
    row("whole run CPU, % of one CPU", [f"{r['whole']:.2f}" for r in runs], "",
        [r["whole"] for r in runs])
    row("peak RSS, MiB (/usr/bin/time)",
        [f"{r['peak_rss']:.1f}{verdict(r['peak_rss'], PEAK_RSS_TARGET_MIB)}" for r in runs],
        f"<= {PEAK_RSS_TARGET_MIB} MiB", [r["peak_rss"] for r in runs])
    row("anonymous RSS peak, MiB (stats file)",
        [f"{r['anon_stats']:.1f}{verdict(r['anon_stats'], ANON_TARGET_MIB)}" for r in runs],
        f"<= {ANON_TARGET_MIB} MiB", [r["anon_stats"] for r in runs])
    row("anonymous RSS peak, MiB (polled)", [f"{r['anon_polled']:.1f}" for r in runs], "",
        [r["anon_polled"] for r in runs])
    row("  symbols held, MiB (stats file, peak)", [f"{r['symbols']:.1f}" for r in runs], "",
        [r["symbols"] for r in runs])
    row("  ELF files open (stats file, peak)", [str(r["elf_files"]) for r in runs])
    row("BPF maps, MiB (memlock, polled peak)", [f"{r['maps']:.1f}" for r in runs], "",
        [r["maps"] for r in runs])
    row("samples per steady interval (mean)",
        [f"{r['samples']:.0f}" if "samples" in r else "n/a" for r in runs])
    row("  of them the benchmark's / host / others'",
        ["{ours:.0f} / {host:.0f} / {others:.0f}".format(**r["samples_by_kind"])
         if "samples_by_kind" in r else "n/a" for r in runs])
    row("targets with dumps", [str(r["targets"]) for r in runs])
    row("JVM samples named, %",
        [f"{r['named']:.2f}{verdict(r['named'], NAMED_TARGET, False)} of {r['jvm_samples']}"
         if r["named"] is not None else "no JVM samples" for r in runs],
        f">= {NAMED_TARGET:.0f} %")
    row("JVMs named within one interval",
        [f"{r['jvms_seen'] - len(r['late_jvms'])}/{jvms}"
         f"{' met' if r['jvms_seen'] == jvms and not r['late_jvms'] else ' NOT met'}"
         if jvms else "no JVMs" for r in runs], "all")
    row("JIT frames unnamed, % (stats file)",
        [f"{r['jit_unnamed']:.2f}" if r["jit_unnamed"] is not None else "no JIT frames"
         for r in runs])
    row("warning or error lines in the log", [str(r["warnings"]) for r in runs])

    header = [f"{frequency} Hz, {minutes} min"] + [r["label"] for r in runs]
    if len(runs) == 2:
        header.append("ratio")
    header.append("target")
    widths = [max(len(line[i]) for line in rows + [header]) for i in range(len(header))]
    for line in [header] + rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    for r in runs:
        if r["late_jvms"]:
            print(f"  {r['label']}: JVMs not named within one interval: "
                  + " ".join(r["late_jvms"]))
        if r["foreign"]:
            print(f"  {r['label']}: warning: {len(r['foreign'])} targets are not the benchmark's "
                  f"(something else ran containers meanwhile; its cost is in the figures): "
                  + " ".join(r["foreign"][:10]) + (" …" if len(r["foreign"]) > 10 else ""))
        missing = jvms - r["jvms_seen"]
        if jvms and missing:
            print(f"  {r['label']}: {missing} JVM(s) without a dump")


def main():
    runs_dir, interval = sys.argv[1], int(sys.argv[2])
    jvms = int(sys.argv[3])
    runs = {}
    minutes = ""
    for name in sorted(os.listdir(runs_dir)):
        run_dir = os.path.join(runs_dir, name)
        result = analyse(run_dir, interval)
        minutes = read_meta(run_dir)["minutes"]
        runs.setdefault(result["frequency"], []).append(result)
    for frequency, results in runs.items():
        results.sort(key=lambda r: r["role"] != "candidate")
        print()
        table(frequency, results, jvms, minutes, interval)


if __name__ == "__main__":
    main()
