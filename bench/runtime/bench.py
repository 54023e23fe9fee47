"""Driver of the DDP benchmark: runs (a) ddp::DistributedDataParallel,
(b) PyTorch's DistributedDataParallel and (c) one process without DDP,
alternating, several repetitions, and prints medians and ratios.

Also (c2): as many independent processes without DDP as there are ranks, at
once, the slowest one's step time. It is what the machine gives N processes
that never communicate (shared cores, caches and memory bandwidth, uneven
ranks), so a - c2 is the cost of DDP itself, while a - c also holds what
running N processes at once costs.

usage: bench.py --bench <ddp_bench binary> [--reps N] [--world-size 2]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = [  # model, per-rank batch, measured steps
    ("mlp", 8, 60),
    ("mlp", 64, 25),
    ("convnet", 32, 30),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd_for_rank, world_size, every_rank=False, extra_env=None):
    """Starts world_size ranks, returns rank 0's RESULT dict (every rank's
    RESULT, a list, with every_rank); extra_env is added to each rank's
    environment."""
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **(extra_env or {}))
        procs.append(subprocess.Popen(cmd_for_rank, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    result = None
    results = []
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            sys.exit(f"rank {rank} of {cmd_for_rank} failed ({p.returncode}):\n{err}")
        for line in out.splitlines():
            if line.startswith("RESULT "):
                results.append(json.loads(line[len("RESULT "):]))
                if rank == 0:
                    result = results[-1]
    if every_rank:
        if len(results) != world_size:
            sys.exit(f"{len(results)} RESULTs from {world_size} ranks of {cmd_for_rank}")
        return results
    if result is None:
        sys.exit(f"no RESULT from rank 0 of {cmd_for_rank}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    ws = args.world_size

    rows = []
    configs = CONFIGS + [("convnet_sync", 32, 30)]
    for model, batch, steps in configs:
        common = ["--model", model, "--batch", str(batch), "--steps", str(steps)]
        runs = {
            "a": lambda: run([args.bench, "--mode", "ddp"] + common, ws),
            "c": lambda: run([args.bench, "--mode", "single"] + common, 1),
            "c2": lambda: max(run([args.bench, "--mode", "single"] + common, ws,
                                  every_rank=True), key=lambda r: r["median_ms"]),
        }
        if model != "convnet_sync":  # PyTorch 1.13's SyncBatchNorm is CUDA only
            runs["b"] = lambda: run(
                [args.python, os.path.join(HERE, "torch_ddp_bench.py")] + common, ws)
        samples = {k: [] for k in runs}
        cpu = {k: [] for k in runs}
        # (c2)'s CPU time is the slowest process's; only (a), (b), (c) are shown.
        allreduce = []
        last_a = None
        order = list(runs)
        for rep in range(args.reps):
            for key in order[rep % len(order):] + order[:rep % len(order)]:
                r = runs[key]()
                samples[key].append(r["median_ms"])
                cpu[key].append(r["cpu_ms"])
                if key == "a":
                    last_a = r
            allreduce.append(run([args.bench, "--mode", "allreduce", "--model", model,
                                  "--steps", "30"], ws)["median_ms"])
        med = {k: statistics.median(v) for k, v in samples.items()}
        cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
        ar = statistics.median(allreduce)
        row = dict(model=model, batch=batch, a=med["a"], b=med.get("b"), c=med["c"],
                   c2=med["c2"],
                   allreduce=ar, buckets=last_a["buckets"],
                   allreduces=last_a["allreduces_per_step"],
                   collectives=last_a["collectives_per_step"],
                   bytes=last_a["bytes_per_step"], params=last_a["params"],
                   cpu_a=cpu_med["a"], cpu_b=cpu_med.get("b"), cpu_c=cpu_med["c"],
                   samples=samples)
        rows.append(row)
        print(json.dumps(row), flush=True)

    print()
    print(f"{ws} Gloo ranks, 1 thread per rank, {args.reps} alternating repetitions, "
          "median step times in ms")
    print("| model | batch/rank | params | (a) ddp:: | (b) torch DDP | (c) 1 process "
          f"| (c2) {ws} processes | a/b | a/c | a-c | a-c2 | b-c2 | bare all-reduce "
          "| buckets | all-reduces/step | collectives/step | bytes/step |")
    print("|" + "---|" * 17)
    for r in rows:
        b = f"{r['b']:.2f}" if r["b"] else "n/a"
        ab = f"{r['a'] / r['b']:.2f}" if r["b"] else "n/a"
        bc2 = f"{r['b'] - r['c2']:.2f}" if r["b"] else "n/a"
        print(f"| {r['model']} | {r['batch']} | {r['params']} | {r['a']:.2f} | {b} | "
              f"{r['c']:.2f} | {r['c2']:.2f} | {ab} | {r['a'] / r['c']:.2f} | "
              f"{r['a'] - r['c']:.2f} | {r['a'] - r['c2']:.2f} | {bc2} | "
              f"{r['allreduce']:.2f} | {r['buckets']} | {r['allreduces']:.0f} | "
              f"{r['collectives']:.0f} | {r['bytes']:.0f} |")
    print()
    print("CPU time per step and rank (user + system, all threads), median, ms:")
    print("| model | batch/rank | (a) ddp:: | (b) torch DDP | (c) 1 process | a-c | b-c |")
    print("|" + "---|" * 7)
    for r in rows:
        b = f"{r['cpu_b']:.2f}" if r["cpu_b"] else "n/a"
        bc = f"{r['cpu_b'] - r['cpu_c']:.2f}" if r["cpu_b"] else "n/a"
        print(f"| {r['model']} | {r['batch']} | {r['cpu_a']:.2f} | {b} | {r['cpu_c']:.2f} | "
              f"{r['cpu_a'] - r['cpu_c']:.2f} | {bc} |")


if __name__ == "__main__":
    main()
