"""The runtime against an earlier build of itself: ddp::DistributedDataParallel's
step time with this tree's runtime (a) and a baseline's (b), the two run in
turn, A B A B ..., several repetitions, and the median of the ratios a/b taken
pair by pair (so a drift of the machine's speed cancels out). The fast path's
cost of a change, e.g. ddp::join's per-bucket stepping count (issue 55).

usage: versus.py --bench <ddp_bench> --baseline <ddp_bench of the baseline>
                 [--reps N] [--world-size 2] [--model NAME ...]
"""
import argparse
import statistics

from bench import CONFIGS, run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--model", action="append",
                        help="only this model's configurations (repeatable)")
    args = parser.parse_args()
    ws = args.world_size
    rows = []
    for model, batch, steps in CONFIGS:
        if args.model and model not in args.model:
            continue
        common = ["--mode", "ddp", "--model", model, "--batch", str(batch),
                  "--steps", str(steps)]
        a, b, ratios = [], [], []
        for rep in range(args.reps):
            # Alternate which goes first, so neither always runs on a
            # machine the other has just warmed.
            pair = [("a", args.bench), ("b", args.baseline)]
            if rep % 2:
                pair.reverse()
            got = {key: run([binary] + common, ws)["median_ms"]
                   for key, binary in pair}
            a.append(got["a"])
            b.append(got["b"])
            ratios.append(got["a"] / got["b"])
        rows.append((model, batch, statistics.median(a), statistics.median(b),
                     statistics.median(ratios), min(ratios), max(ratios)))
    print(f"{ws} Gloo ranks, 1 thread per rank, {args.reps} pairs, median step "
          "times in ms; a/b: median of the pairs' ratios (min-max)")
    print("| model | batch/rank | (a) this tree | (b) baseline | a/b |")
    print("|---|---|---|---|---|")
    for model, batch, ma, mb, r, lo, hi in rows:
        print(f"| {model} | {batch} | {ma:.3f} | {mb:.3f} | {r:.4f} "
              f"({lo:.3f}-{hi:.3f}) |")


if __name__ == "__main__":
    main()
