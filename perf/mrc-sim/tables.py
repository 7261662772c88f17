#!/usr/bin/env python3
"""Prints the markdown tables of perf/RESULTS.md from perf/mrc-sim/*.json, and writes the cost
curve (cost.csv, cost.png via gnuplot). Usage: perf/mrc-sim/tables.py"""
import json, os, subprocess, sys

D = os.path.dirname(os.path.abspath(__file__))

def load(name):
    p = os.path.join(D, name + ".json")
    if not os.path.exists(p):
        return []
    d = json.load(open(p))
    return d if isinstance(d, list) else [d]

def row(r):
    eff = "%.3f" % r["efficiency"]
    bus = " | %.2f" % r["busbw_gbps"] if "busbw_gbps" in r else ""
    return ("| %s | %d | %s | %.3f | %.3f | %s%s | %.3f / %.3f / %.3f | %d | %d | %d | %d | %.0f | %s |" % (
        r["pattern"], r["hosts"], r["transport"], r["ideal_s"] * 1e3, r["completion_s"] * 1e3, eff, bus,
        r["fct_s"]["min"] * 1e3, r["fct_s"]["p50"] * 1e3, r["fct_s"]["max"] * 1e3, r["retransmits"],
        r["rtos"], r["trims"], r["ev_changes"], r["sim_wall_s"], "PASS" if r["ok"] else "FAIL " + r["failure"]))

HDR = ("| pattern | hosts | transport | ideal ms | done ms | efficiency | fct min / p50 / max ms "
       "| retx | RTOs | trims | EV changes | wall s | verdict |\n| --- | --- | --- | --- | --- | --- "
       "| --- | --- | --- | --- | --- | --- | --- |")
RING_HDR = HDR.replace("| efficiency |", "| efficiency | busbw Gb/s |").replace(
    "| --- | --- | --- | --- | --- | --- |", "| --- | --- | --- | --- | --- | --- | --- |", 1)

print("### scale table\n")
print(HDR)
for n in ["perm_64", "perm_256", "perm_1024", "a2a_64", "a2a_256", "a2a_1024"]:
    for r in load(n):
        print(row(r))
print()
print(RING_HDR)
for n in ["ring_64", "ring_256"]:
    for r in load(n):
        print(row(r))
print("\n### fault runs\n")
print(HDR)
for n in ["a2a_256", "fault_t1_256", "fault_t0_256"]:
    for r in load(n):
        if r["transport"] in ("mrc", "plane"):
            print(row(r) + " " + "; ".join(f["fault"] for f in r["faults"]))
print("\n### cost curve\n")
print("| hosts | sim events | events per host | wall s | CPU s | CPU us per event | CPU ms per host | peak RSS MiB |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
csv = ["hosts,cpu_s,rss_mib,events"]
for h in [64, 256, 1024, 2048, 4096]:
    for r in load("cost_%d" % h):
        cpu = r.get("sim_cpu_s", r["sim_wall_s"])
        print("| %d | %d | %d | %.1f | %.1f | %.2f | %.1f | %.0f |" % (h, r["sim_events"], r["sim_events"] // h,
              r["sim_wall_s"], cpu, cpu / r["sim_events"] * 1e6, cpu / h * 1e3, r["peak_rss_mib"]))
        csv.append("%d,%.3f,%.1f,%d" % (h, cpu, r["peak_rss_mib"], r["sim_events"]))
open(os.path.join(D, "cost.csv"), "w").write("\n".join(csv) + "\n")
gp = """set terminal pngcairo size 900,420 font 'sans,10'
set output '%(d)s/cost.png'
set datafile separator ','
set title 'mrc-sim cost: permutation, 4 MiB per host, mrc (same per-host load)'
set xlabel 'hosts'
set logscale xy 2
set ylabel 'CPU time (s)'
set y2label 'peak RSS (MiB)'
set logscale y2 2
set ytics nomirror
set y2tics
set grid
set key top left
plot '%(d)s/cost.csv' using 1:2 every ::1 with linespoints lw 2 title 'CPU s', \\
     '%(d)s/cost.csv' using 1:3 every ::1 axes x1y2 with linespoints lw 2 title 'peak RSS MiB', \\
     '%(d)s/cost.csv' using 1:($1*%(k)f) every ::1 with lines dt 2 title 'linear in hosts'
""" % {"d": D, "k": 0}
rows = [l.split(",") for l in csv[1:]]
if rows:
    k = float(rows[0][1]) / float(rows[0][0])
    gp = gp.replace("($1*0.000000)", "($1*%g)" % k)
    subprocess.run(["gnuplot"], input=gp.encode(), check=False)
