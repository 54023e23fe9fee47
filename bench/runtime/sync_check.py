"""What the sync check (DistributedDataParallelOptions::check_sync_every,
DDP_CHECK_SYNC) costs: ddp::DistributedDataParallel's step time with the
check off, every step (K = 1) and every 100 steps (K = 100), alternating,
several repetitions; medians and ratios against "off" from the same run.

usage: sync_check.py --bench <ddp_bench binary> [--reps N] [--world-size 2]
(bench/runtime/run.sh sync-check [BUILD_DIR] [REPS] builds and runs it)
"""
import argparse
import json
import statistics

from bench import CONFIGS, run

SETTINGS = [("off", "0"), ("K=1", "1"), ("K=100", "100")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for model, batch, steps in CONFIGS:
        # K = 100 needs steps past 100 to check at all: 200 measured steps.
        steps = max(steps, 200)
        common = ["--model", model, "--batch", str(batch), "--steps", str(steps),
                  "--mode", "ddp"]
        samples = {name: [] for name, _ in SETTINGS}
        for rep in range(args.reps):
            order = SETTINGS[rep % len(SETTINGS):] + SETTINGS[:rep % len(SETTINGS)]
            for name, every in order:
                r = run([args.bench] + common + ["--check-sync", every],
                        args.world_size)
                samples[name].append(r["mean_ms"])
        med = {name: statistics.median(v) for name, v in samples.items()}
        row = dict(model=model, batch=batch, params=r["params"], samples=samples, **med)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{args.world_size} Gloo ranks, 1 thread per rank, {args.reps} alternating "
          "repetitions, step time in ms (the median of each run's mean over its steps)")
    print("| model | batch/rank | params | off | K=1 | K=100 | K=1/off | K=100/off |")
    print("|" + "---|" * 8)
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['params']} | {r['off']:.3f} | "
              f"{r['K=1']:.3f} | {r['K=100']:.3f} | {r['K=1'] / r['off']:.3f} | "
              f"{r['K=100'] / r['off']:.3f} |")


if __name__ == "__main__":
    main()
