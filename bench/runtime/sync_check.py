"""What the runtime's safety nets cost: ddp::DistributedDataParallel's step
time with every net off (no periodic sync check, DDP_WARN_UNWRAPPED=0: no
watch of backward passes for unwrapped parameters), with the defaults (the
sync check every 256 steps, the watch on), and with the sync check every
step (K = 1) and every 100 steps (K = 100), alternating, several
repetitions; medians and ratios against "off" from the same run.

usage: sync_check.py --bench <ddp_bench binary> [--reps N] [--world-size 2]
(bench/runtime/run.sh sync-check [BUILD_DIR] [REPS] builds and runs it)
"""
import argparse
import json
import statistics

from bench import CONFIGS, run

# name, --check-sync (None: the option's default), environment
SETTINGS = [("off", "0", {"DDP_WARN_UNWRAPPED": "0"}),
            ("default", None, {}),
            ("K=1", "1", {}),
            ("K=100", "100", {})]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=600,
                        help="measured steps a run (the default period, "
                             "256, checks twice in 600)")
    parser.add_argument("--config", action="append", default=[],
                        help="MODEL:BATCH, only these of bench.py's "
                             "CONFIGS (repeatable)")
    args = parser.parse_args()
    rows = []
    configs = [c for c in CONFIGS
               if not args.config or f"{c[0]}:{c[1]}" in args.config]
    for model, batch, steps in configs:
        steps = max(steps, args.steps)
        common = ["--model", model, "--batch", str(batch), "--steps", str(steps),
                  "--mode", "ddp"]
        samples = {name: [] for name, _, _ in SETTINGS}
        for rep in range(args.reps):
            order = SETTINGS[rep % len(SETTINGS):] + SETTINGS[:rep % len(SETTINGS)]
            for name, every, env in order:
                flags = [] if every is None else ["--check-sync", every]
                r = run([args.bench] + common + flags, args.world_size,
                        extra_env=env)
                samples[name].append(r["mean_ms"])
        med = {name: statistics.median(v) for name, v in samples.items()}
        row = dict(model=model, batch=batch, params=r["params"], samples=samples, **med)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{args.world_size} Gloo ranks, 1 thread per rank, {args.reps} alternating "
          "repetitions, step time in ms (the median of each run's mean over its steps)")
    print("| model | batch/rank | params | off | default | K=1 | K=100 | "
          "default/off | K=1/off | K=100/off |")
    print("|" + "---|" * 10)
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['params']} | {r['off']:.3f} | "
              f"{r['default']:.3f} | {r['K=1']:.3f} | {r['K=100']:.3f} | "
              f"{r['default'] / r['off']:.3f} | {r['K=1'] / r['off']:.3f} | "
              f"{r['K=100'] / r['off']:.3f} |")


if __name__ == "__main__":
    main()
