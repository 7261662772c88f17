#!/usr/bin/env python3
"""Real NCCL through libnccl-net-mrc: PyTorch's NCCL, two ranks on one GPU.

Needs a CUDA GPU and PyTorch (its pip wheels bring NCCL); the project's CI has neither, so this
is run by hand where a GPU is at hand. Both ranks share GPU 0 and look like two hosts to NCCL
(NCCL_HOSTID differs, P2P and SHM off), so every byte between them goes through the net
plugin, over the MRC planes named by MRC_PLANES (default two planes on ::1, ephemeral ports).

Two processes on one GPU take turns on it (time slices of about 2 ms) unless CUDA MPS lets
their kernels run at once; a receiver-driven transport (MRC, NCCL's InfiniBand) then waits a
slice per message, a sender-driven one (sockets) does not. `--mps` starts an MPS daemon for
the run (pipe and log folders in a temporary directory) and stops it at the end, so the figures
measure the network path and not the time slicing. Without a GPU of one's own per rank, use it.

For each transport asked for (`mrc`: NCCL_NET_PLUGIN=mrc; `socket`: NCCL's own TCP sockets,
the reference, in the same run) it checks, then times:
  - all_reduce (sum) of every size in --sizes: the result is compared element by element;
  - send/recv of the same sizes: the receiver compares every byte with the sender's pattern.
and prints one JSON line per (transport, op, size): algbw and busbw in GB/s as nccl-tests
defines them (all_reduce busbw = algbw x 2(n-1)/n), the mean time per op, and `ok`.
Exit status 1 when any check fails or a rank dies; 0 otherwise.

Usage: python3 perf/nccl_torch.py --plugin-dir build/lib [--mps] [--transports mrc,socket]
                                  [--sizes 8,64K,1M,16M,64M] [--iters 20]
"""
import argparse
import json
import os
import socket
import sys
import time


def parse_sizes(text):
    out = []
    for word in text.split(","):
        word = word.strip().upper()
        mult = 1
        for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
            if word.endswith(suffix):
                word, mult = word[:-1], m
        if not word.isdigit() or int(word) * mult <= 0:
            raise SystemExit(f"nccl_torch.py: --sizes: not a positive byte count: {word!r}")
        out.append(int(word) * mult)
    return out


def rank_main(rank, args, transport, port, queue):
    env = os.environ
    env["NCCL_HOSTID"] = f"mrc-torch-host{rank}"
    env["NCCL_P2P_DISABLE"] = "1"
    env["NCCL_SHM_DISABLE"] = "1"
    env["NCCL_IB_DISABLE"] = "1"
    env.setdefault("NCCL_DEBUG", "INFO")
    env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    if transport == "mrc":
        env["NCCL_NET_PLUGIN"] = "mrc"  # dlopen("libnccl-net-mrc.so"): LD_LIBRARY_PATH, main()
        env.setdefault("MRC_PLANES", "::1,::1")
        env.setdefault("MRC_PORT", "0")
        env["NCCL_NET"] = "MRC"
    else:
        env["NCCL_NET_PLUGIN"] = "none"
        env["NCCL_NET"] = "Socket"
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    dev = torch.device("cuda", 0)
    results = []
    try:
        for size in args.sizes:
            n = max(1, size // 4)
            # all_reduce: rank r holds r+1+i%7 in element i; the sum is 3 + 2*(i%7).
            idx = torch.arange(n, device=dev, dtype=torch.int32) % 7
            buf = (idx + (rank + 1)).to(torch.float32)
            dist.all_reduce(buf)
            torch.cuda.synchronize()
            ok_ar = bool(torch.equal(buf, (idx * 2 + 3).to(torch.float32)))
            # send/recv: a seeded pattern from rank 0, compared byte for byte at rank 1.
            g = torch.Generator(device="cpu").manual_seed(size)
            pattern = torch.randint(0, 256, (size,), generator=g, dtype=torch.uint8).to(dev)
            if rank == 0:
                dist.send(pattern, 1)
                ok_sr = True
            else:
                got = torch.empty(size, dtype=torch.uint8, device=dev)
                dist.recv(got, 0)
                torch.cuda.synchronize()
                ok_sr = bool(torch.equal(got, pattern))
            # timing: warm-up then --iters ops back to back, one synchronize at the end.
            for op in ("all_reduce", "sendrecv"):
                iters = args.iters if size >= (1 << 20) else args.iters * 5
                t = torch.ones(n if op == "all_reduce" else size,
                               dtype=torch.float32 if op == "all_reduce" else torch.uint8,
                               device=dev)
                def one():
                    if op == "all_reduce":
                        dist.all_reduce(t)
                    elif rank == 0:
                        dist.send(t, 1)
                    else:
                        dist.recv(t, 0)
                for _ in range(3):
                    one()
                torch.cuda.synchronize()
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    one()
                torch.cuda.synchronize()
                dt = (time.perf_counter() - t0) / iters
                nbytes = n * 4 if op == "all_reduce" else size
                algbw = nbytes / dt / 1e9
                busbw = algbw * (2 * (2 - 1) / 2) if op == "all_reduce" else algbw
                results.append({"transport": transport, "op": op, "bytes": nbytes,
                                "iters": iters, "time_us": round(dt * 1e6, 2),
                                "algbw_GBps": round(algbw, 4), "busbw_GBps": round(busbw, 4),
                                "ok": ok_ar if op == "all_reduce" else ok_sr})
        dist.barrier()
    finally:
        dist.destroy_process_group()
    queue.put((rank, results))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin-dir", default="build/lib",
                    help="folder holding libnccl-net-mrc.so (default build/lib)")
    ap.add_argument("--transports", default="mrc,socket")
    ap.add_argument("--sizes", default="8,4K,64K,1M,16M,64M")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--mps", action="store_true",
                    help="run the ranks under a CUDA MPS daemon started for this run")
    args = ap.parse_args()
    if args.iters < 1:
        raise SystemExit(f"nccl_torch.py: --iters must be >= 1, got {args.iters}")
    args.sizes = parse_sizes(args.sizes)
    args.plugin_dir = os.path.abspath(args.plugin_dir)
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    for t in transports:
        if t not in ("mrc", "socket"):
            raise SystemExit(f"nccl_torch.py: --transports: unknown transport {t!r} "
                             "(mrc, socket)")
    if "mrc" in transports and not os.path.exists(
            os.path.join(args.plugin_dir, "libnccl-net-mrc.so")):
        raise SystemExit(f"nccl_torch.py: no libnccl-net-mrc.so in {args.plugin_dir}")
    # The dynamic loader reads LD_LIBRARY_PATH once at process start: set it before the ranks
    # are spawned (each is a fresh interpreter), not inside them.
    os.environ["LD_LIBRARY_PATH"] = args.plugin_dir + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    import torch.multiprocessing as mp

    mps_dir = None
    if args.mps:
        import shutil
        import subprocess
        import tempfile
        ctl = shutil.which("nvidia-cuda-mps-control")
        if ctl is None:
            raise SystemExit("nccl_torch.py: --mps: nvidia-cuda-mps-control is not on PATH")
        mps_dir = tempfile.mkdtemp(prefix="nccl-torch-mps-")
        os.environ["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(mps_dir, "pipe")
        os.environ["CUDA_MPS_LOG_DIRECTORY"] = os.path.join(mps_dir, "log")
        os.makedirs(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
        os.makedirs(os.environ["CUDA_MPS_LOG_DIRECTORY"])
        subprocess.run([ctl, "-d"], check=True)
    try:
        failed = run_all(args, transports, mp)
    finally:
        if mps_dir is not None:
            subprocess.run([ctl], input=b"quit\n", check=False)
            shutil.rmtree(mps_dir, ignore_errors=True)
    sys.exit(1 if failed else 0)


def run_all(args, transports, mp):
    failed = False
    ctx = mp.get_context("spawn")
    for transport in transports:
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=rank_main, args=(r, args, transport, port, queue))
                 for r in range(2)]
        for p in procs:
            p.start()
        got = {}
        deadline = time.time() + 600
        while len(got) < 2 and time.time() < deadline:
            try:
                r, res = queue.get(timeout=5)
                got[r] = res
            except Exception:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
        for p in procs:
            p.join(timeout=30)
        if len(got) < 2:
            print(json.dumps({"transport": transport, "error": "a rank failed",
                              "exitcodes": [p.exitcode for p in procs]}), flush=True)
            failed = True
            continue
        for a, b in zip(got[0], got[1]):
            row = dict(b)  # rank 1's view: the receiver's checks, the same timings
            row["ok"] = a["ok"] and b["ok"]
            failed |= not row["ok"]
            print(json.dumps(row), flush=True)
    return failed


if __name__ == "__main__":
    main()
