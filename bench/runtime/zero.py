"""What ddp::ZeroRedundancyOptimizer saves and costs: optimizer state bytes
per rank and step time, sharded against unsharded (the wrapped optimizer
alone), both under ddp::DistributedDataParallel on N Gloo ranks, alternating,
several repetitions; medians and ratios from the same run.

usage: zero.py --bench <ddp_bench binary> [--reps N] [--world-size 2]
(bench/runtime/run.sh zero [BUILD_DIR] [REPS] builds and runs it)
"""
import argparse
import json
import statistics

from bench import run

CONFIGS = [("mlp", 8, 60)]  # model, per-rank batch, measured steps
OPTIMIZERS = [("adam", "Adam"), ("sgd", "SGD, momentum 0.9")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for optimizer, label in OPTIMIZERS:
        for model, batch, steps in CONFIGS:
            common = ["--model", model, "--batch", str(batch), "--steps",
                      str(steps), "--mode", "ddp", "--optimizer", optimizer]
            samples = {"plain": [], "zero": []}
            step_samples = {"plain": [], "zero": []}
            results = {}
            for rep in range(args.reps):
                order = ["plain", "zero"] if rep % 2 == 0 else ["zero", "plain"]
                for name in order:
                    r = run([args.bench] + common + ["--zero", str(int(name == "zero"))],
                            args.world_size)
                    samples[name].append(r["mean_ms"])
                    step_samples[name].append(r["step_ms"])
                    results[name] = r
            med = {k: statistics.median(v) for k, v in samples.items()}
            step_med = {k: statistics.median(v) for k, v in step_samples.items()}
            row = dict(optimizer=label, model=model, batch=batch,
                       params=results["plain"]["params"],
                       plain_state=results["plain"]["state_bytes_max"],
                       zero_state=results["zero"]["state_bytes_max"],
                       zero_total=results["zero"]["state_bytes_total"],
                       plain_ms=med["plain"], zero_ms=med["zero"],
                       plain_step_ms=step_med["plain"], zero_step_ms=step_med["zero"],
                       samples=samples)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(f"{args.world_size} Gloo ranks, 1 thread per rank, {args.reps} alternating "
          "repetitions; state: the largest rank's optimizer state; time: the median "
          "of each run's mean iteration (forward, backward, step) and of the "
          "optimizer step alone (the sharded step includes its broadcasts)")
    print("| optimizer | model | batch/rank | params | state/rank unsharded | "
          "state/rank sharded | sharded/unsharded state | iteration ms unsharded | "
          "sharded | ratio | opt.step ms unsharded | sharded | ratio |")
    print("|" + "---|" * 13)
    mib = 1024.0 * 1024.0
    for r in rows:
        print(f"| {r['optimizer']} | {r['model']} | {r['batch']} | {r['params']} | "
              f"{r['plain_state'] / mib:.2f} MiB | {r['zero_state'] / mib:.2f} MiB | "
              f"{r['zero_state'] / r['plain_state']:.3f} | "
              f"{r['plain_ms']:.2f} | {r['zero_ms']:.2f} | "
              f"{r['zero_ms'] / r['plain_ms']:.3f} | "
              f"{r['plain_step_ms']:.2f} | {r['zero_step_ms']:.2f} | "
              f"{r['zero_step_ms'] / r['plain_step_ms']:.3f} |")


if __name__ == "__main__":
    main()
