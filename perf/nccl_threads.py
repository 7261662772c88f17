#!/usr/bin/env python3
"""Progress threads and cores: the NCCL plugin's bandwidth with 1..N progress threads, against
NCCL-style TCP sockets, on loopback planes (issue 17, "more than one core of datapath").

No fabric and no GPU: every plane is ::1 (MRC_PLANES, ephemeral ports), so nothing limits a
connection but the CPU, and the figures say how far N progress threads per process carry one
connection where cores exist. Run it on a machine with cores to spare (a 2-core VM cannot show
scaling: both processes' threads share the two cores). Each run is a pair of `perf/nccl_bw`
processes (receiver, sender) as perf/nccl_bw.sh starts them, waited for with wait4, so the CPU
time of every thread of both (user + system, the kernel's loopback delivery included) is
counted. Verification is on (each 4 KiB carries its sequence number).

  mrc-t<N>   NCCL_NET_PLUGIN's harness through libnccl-net-mrc, MRC_PROGRESS_THREADS=N (0: the
             driver's default, progress_threads = 0),
             NCCL_MRC_QPS_PER_CONN=--qps (the planes are split between the threads: p % N)
  tcp-s<K>   nccl_bw --transport tcp --streams K (NCCL's socket transport, K sockets per comm)

Runs alternate --rounds times; prints every run and, per kind, the median Gbit/s, the CPU
seconds per GB moved (both processes), the CPUs kept busy, and each kind against mrc-t1 and
against the best TCP kind. Exit 1 when a run fails or reports corrupt data.

Usage: python3 perf/nccl_threads.py --bin-dir build [--planes 8] [--threads 1,2,4,8] [--qps 4]
                                    [--streams 1,4] [--seconds 4] [--rounds 2] [--size 4194304]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def ints(text, name, least=1):
    try:
        out = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise SystemExit(f"nccl_threads.py: {name}: not a list of integers: {text!r}")
    if not out or any(v < least for v in out):
        raise SystemExit(f"nccl_threads.py: {name}: needs integers >= {least}, got {text!r}")
    return out


def one(args, kind, work):
    """Runs one receiver/sender pair; returns (Gbit/s, bytes, CPU seconds of both)."""
    transport = "mrc" if kind.startswith("mrc") else "tcp"
    rv = os.path.join(work, f"rv-{kind}-{time.monotonic_ns()}")
    env = dict(os.environ)
    env.update({"MRC_CONFIG": os.path.join(work, "empty.json"), "MRC_PORT": "0",
                "MRC_PLANES": ",".join(["::1"] * args.planes)})
    extra = []
    if transport == "mrc":
        env["MRC_PROGRESS_THREADS"] = kind[len("mrc-t"):]
        env["NCCL_MRC_QPS_PER_CONN"] = str(args.qps)
    else:
        extra = ["--streams", kind[len("tcp-s"):]]
    bw = os.path.join(args.bin_dir, "perf", "nccl_bw")
    plugin = os.path.join(args.bin_dir, "lib", "libnccl-net-mrc.so")
    procs = {}
    outs = {}
    for role in ("recv", "send"):
        outs[role] = open(os.path.join(work, f"out-{kind}-{role}"), "w+")
        cmd = [bw, "--transport", transport, "--role", role, "--rendezvous", rv, "--plugin",
               plugin, "--size", str(args.size), "--seconds", str(args.seconds)] + extra
        procs[role] = subprocess.Popen(cmd, env=env, stdout=outs[role], stderr=subprocess.STDOUT)
    cpu = 0.0
    failed = False
    for role, p in procs.items():
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu += ru.ru_utime + ru.ru_stime
        failed |= p.returncode != 0
    text = {}
    for role, f in outs.items():
        f.seek(0)
        text[role] = f.read()
        f.close()
    # the receiver's line: "<transport> <Gbit/s> Gbit/s (<bytes> bytes in <s> s)" (tcp: "(<k>
    # streams, <bytes> bytes in <s> s)")
    line = next((ln for ln in text["recv"].splitlines()
                 if ln.startswith(transport + " ") and " Gbit/s " in ln), None)
    if failed or line is None:
        sys.stderr.write(f"nccl_threads.py: {kind} failed:\n{text['recv']}\n{text['send']}\n")
        raise SystemExit(1)
    words = line.replace("(", " ").replace(",", " ").split()
    gbps = float(words[1])
    nbytes = int(words[words.index("bytes") - 1])
    return gbps, nbytes, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default="build")
    ap.add_argument("--planes", type=int, default=8)
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--qps", type=int, default=4)
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size", type=int, default=4 << 20)
    args = ap.parse_args()
    threads = ints(args.threads, "--threads", least=0)  # 0: the driver's default
    streams = ints(args.streams, "--streams")
    if args.planes <= 0 or args.planes > 16:
        raise SystemExit(f"nccl_threads.py: --planes must be 1..16, got {args.planes}")
    if max(threads) > args.planes:
        raise SystemExit("nccl_threads.py: --threads: at most one progress thread per plane "
                         f"(--planes {args.planes})")
    if args.qps <= 0 or args.seconds <= 0 or args.rounds <= 0 or args.size <= 0:
        raise SystemExit("nccl_threads.py: --qps, --seconds, --rounds and --size must be positive")
    kinds = [f"mrc-t{t}" for t in threads] + [f"tcp-s{s}" for s in streams]
    print(f"cores: {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable); {args.planes} loopback "
          f"planes, {args.qps} QPs per connection, {args.size} B messages x 8 in flight, "
          f"{args.seconds} s per run, {args.rounds} rounds", flush=True)
    res = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="mrc-threads-") as work:
        with open(os.path.join(work, "empty.json"), "w") as f:
            f.write("{}")
        for r in range(args.rounds):
            for k in kinds:
                gbps, nbytes, cpu = one(args, k, work)
                res[k].append((gbps, nbytes, cpu))
                print(f"round {r + 1} {k:8s} {gbps:7.2f} Gbit/s  {nbytes} B  CPU {cpu:6.2f} s  "
                      f"{cpu / (nbytes / 1e9):6.3f} CPU s/GB", flush=True)
    med = {}
    for k, runs in res.items():
        g = statistics.median(x[0] for x in runs)
        c = statistics.median(x[2] / (x[1] / 1e9) for x in runs)
        med[k] = (g, c)
    base = med[kinds[0]][0]
    tcp_best = max(med[k][0] for k in kinds if k.startswith("tcp"))
    print(f"{'kind':8s} {'Gbit/s':>8s} {'CPU s/GB':>9s} {'CPUs':>6s} {'/mrc-t1':>8s} {'/best tcp':>9s}")
    for k in kinds:
        g, c = med[k]
        print(f"{k:8s} {g:8.2f} {c:9.3f} {g / 8 * c:6.2f} {g / base:8.2f} {g / tcp_best:9.2f}")


if __name__ == "__main__":
    main()
