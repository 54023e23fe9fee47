#!/usr/bin/env python3
"""The DDP benchmark across test hosts (test/multihost/hosts.py): 2 hosts
joined by a rate-limited link, one ddprun per host, MLP at per-rank batch 8
and 64, 2 hosts x 1 rank and 2 hosts x 2 ranks. Variants, alternating, one
run each per repetition:

  ours        ddp::DistributedDataParallel, plain (DDP_HIERARCHICAL=0)
  ours-hier   the hierarchical all-reduce (2 x 2 only)
  ours-comp   compressed (DDP_COMM_HOOK=bf16 where the LibTorch's Gloo has
              bfloat16, else fp16), hierarchical on 2 x 2
  torch       PyTorch's DistributedDataParallel on Gloo
  torch-fp16  the same with its fp16_compress_hook

It prints medians of the step time and of backward's time (which holds
DDP's wait), and the bound: the bytes host 0's link carried per measured
step (its interface counters, read when rank 0 prints the MARK lines around
the measured steps) divided by the link rate: no step can cross the link
faster.

usage (root):
  multihost.py --ddprun BUILD/bin/ddprun --bench BUILD/bench-runtime/ddp_bench
               [--python PY] [--rates 1gbit,10gbit] [--reps 3] [--steps 20]
               [--nprocs 1,2] [--batches 8,64] [--variants ours-hier,...]
bench/runtime/run.sh multihost [BUILD_DIR] [REPS] builds and runs it.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "multihost"))
import hosts  # noqa: E402

PORT = 29600
# In the order of the table.
VARIANTS = ("ours", "ours-hier", "ours-comp", "torch", "torch-fp16")


def link_bytes(h, host):
    """tx + rx bytes of the host's eth0 (its network namespace's counters,
    read through the host's holder process)."""
    with open(f"/proc/{h.holders[host].pid}/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "eth0":
                fields = rest.split()
                return int(fields[0]), int(fields[8])
    raise RuntimeError(f"host{host} has no eth0")


def run(h, args, nproc, command, env_extra):
    """One job; returns (rank 0's RESULT, link bytes per measured step,
    steps)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    # PyTorch's Gloo needs the interface (the test hosts' names resolve to
    # no address); ours finds it, and is given the same for a like setup.
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               DDP_TIMEOUT_SECONDS="300", GLOO_SOCKET_IFNAME="eth0")
    env.update(env_extra)
    procs = []
    logs = []
    for node in range(2):
        argv = [args.ddprun, "--nproc-per-node", str(nproc), "--nnodes", "2",
                "--node-rank", str(node), "--master-addr", h.addr(0),
                "--master-port", str(PORT), "--tee=1", "--"] + command
        logs.append(tempfile.TemporaryFile(mode="w+"))
        # Only node 0's stdout is read (below, as it comes).
        procs.append(h.run(node, argv, background=True, env=env,
                           stdout=subprocess.PIPE if node == 0
                           else subprocess.DEVNULL, stderr=logs[-1]))
    marks = {}
    result = {}

    def read_rank0():
        for line in procs[0].stdout:
            m = re.match(r"^\[rank0\]: MARK (\w+)", line)
            if m:
                marks[m.group(1)] = link_bytes(h, 0)
            elif line.startswith("[rank0]: RESULT "):
                result.update(json.loads(line[len("[rank0]: RESULT "):]))

    reader = threading.Thread(target=read_rank0, daemon=True)
    reader.start()
    errors = []
    for p, log in zip(procs, logs):
        try:
            p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            hosts._kill_group(p)
            p.wait()
        if p.returncode != 0:
            log.seek(0)
            errors.append(f"exit {p.returncode}: {log.read()[-2000:]}")
        log.close()
    reader.join(30)
    if errors or not result or len(marks) != 2:
        raise SystemExit(f"{command} {env_extra} failed: {errors}, "
                         f"marks {marks}, result {result}")
    (rx0, tx0), (rx1, tx1) = marks["warmup_done"], marks["steps_done"]
    # The busier direction of the link bounds the step.
    per_step = max(rx1 - rx0, tx1 - tx0) / args.steps
    return result, per_step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--rates", default="1gbit,10gbit")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--compression", default="bf16",
                        choices=["bf16", "fp16"],
                        help="ours-comp's hook (fp16 where Gloo lacks bf16)")
    parser.add_argument("--nprocs", default="1,2",
                        help="ranks per host, comma-separated")
    parser.add_argument("--batches", default="8,64",
                        help="per-rank batches, comma-separated")
    parser.add_argument("--variants", default="",
                        help="only these variants (comma-separated); torch "
                        "is always run, as the baseline")
    args = parser.parse_args()
    nprocs = [int(n) for n in args.nprocs.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    known = set(VARIANTS)
    wanted = set(args.variants.split(",")) if args.variants else known
    if wanted - known:
        parser.error(f"--variants: no variant {', '.join(sorted(wanted - known))}"
                     f" (variants: {', '.join(sorted(known))})")
    wanted.add("torch")
    hosts.require_root("the multi-host benchmark")
    torch_py = [args.python, os.path.join(HERE, "torch_ddp_bench.py")]
    version = subprocess.run(
        [args.python, "-c", "import torch; print(torch.__version__)"],
        stdout=subprocess.PIPE, text=True).stdout.strip()
    rows = []
    for rate in args.rates.split(","):
        with hosts.Hosts(2, rate=rate) as h:
            for nproc in nprocs:
                for batch in batches:
                    common = ["--model", "mlp", "--batch", str(batch),
                              "--steps", str(args.steps), "--warmup",
                              str(args.warmup)]
                    ours = [args.bench, "--mode", "ddp"] + common
                    variants = {
                        "ours": (ours, {"DDP_HIERARCHICAL": "0"}),
                        "ours-comp": (ours, {"DDP_COMM_HOOK": args.compression,
                                             "DDP_HIERARCHICAL":
                                             "1" if nproc > 1 else "0"}),
                        "torch": (torch_py + common, {}),
                        "torch-fp16": (torch_py + common + ["--hook", "fp16"],
                                       {}),
                    }
                    if nproc > 1:
                        variants["ours-hier"] = (ours,
                                                 {"DDP_HIERARCHICAL": "1"})
                    order = [k for k in variants if k in wanted]
                    samples = {k: [] for k in order}
                    for rep in range(args.reps):
                        shifted = order[rep % len(order):] + \
                            order[:rep % len(order)]
                        for key in shifted:
                            command, extra = variants[key]
                            result, per_step = run(h, args, nproc, command,
                                                   extra)
                            samples[key].append((result["median_ms"],
                                                 result["backward_ms"],
                                                 per_step))
                    row = dict(rate=rate, hosts=2, nproc=nproc, batch=batch)
                    for key in order:
                        step = statistics.median(s[0] for s in samples[key])
                        backward = statistics.median(s[1] for s in samples[key])
                        link = statistics.median(s[2] for s in samples[key])
                        bound = link * 8 / hosts._rate_bits(rate) * 1000
                        row[key] = dict(step_ms=step, backward_ms=backward,
                                        link_bytes=link, bound_ms=bound)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print()
    print(f"2 test hosts, rate-limited link (tbf), MLP 512-1024-1024-1024-10, "
          f"Gloo, 1 thread per rank, {args.reps} alternating repetitions of "
          f"{args.steps} steps, medians; PyTorch {version}; ours-comp = "
          f"{args.compression}")
    print("| link | hosts x ranks | batch/rank | variant | step ms | backward "
          "ms | link MB/step | bound ms | step / torch |")
    print("|" + "---|" * 9)
    for r in rows:
        base = r["torch"]["step_ms"]
        for key in VARIANTS:
            if key not in r:
                continue
            v = r[key]
            print(f"| {r['rate']} | 2 x {r['nproc']} | {r['batch']} | {key} | "
                  f"{v['step_ms']:.1f} | {v['backward_ms']:.1f} | "
                  f"{v['link_bytes'] / 1e6:.2f} | {v['bound_ms']:.1f} | "
                  f"{v['step_ms'] / base:.2f} |")


if __name__ == "__main__":
    main()
