"""PyTorch's own DDP on the benchmark's models: one rank of a run launched by
bench.py with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set. Prints the same
RESULT line as ddp_bench (rank 0)."""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def cpu_ms():
    """CPU time (user + system, all threads) of this process, in ms."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000.0


def mark(what):
    """MARK line on rank 0 (bench/runtime/multihost.py counts the link's
    bytes between them)."""
    if dist.get_rank() == 0:
        print(f"MARK {what}", flush=True)


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                             nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    if name == "convnet":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
            nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    raise SystemExit(f"unknown model {name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--hook", choices=["none", "fp16", "bf16"],
                        default="none",
                        help="PyTorch's compression comm hook")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)
    model = make_model(args.model)
    x = torch.randn(args.batch, 512) if args.model == "mlp" else torch.randn(
        args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))
    ddp_model = nn.parallel.DistributedDataParallel(model)
    if args.hook != "none":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp_model.register_comm_hook(
            None, default_hooks.fp16_compress_hook if args.hook == "fp16"
            else default_hooks.bf16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times, forward_times, backward_times, step_times = [], [], [], []
    cpu_start = 0.0
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            dist.barrier()
            cpu_start = cpu_ms()
            mark("warmup_done")
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(ddp_model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if i >= args.warmup:
            times.append((t3 - t0) * 1000.0)
            forward_times.append((t1 - t0) * 1000.0)
            backward_times.append((t2 - t1) * 1000.0)
            step_times.append((t3 - t2) * 1000.0)
    cpu_per_step = (cpu_ms() - cpu_start) / args.steps
    mark("steps_done")
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({
            "mode": "torch_ddp", "model": args.model, "batch": args.batch,
            "params": sum(p.numel() for p in model.parameters()),
            "median_ms": statistics.median(times), "cpu_ms": cpu_per_step,
            "forward_ms": statistics.median(forward_times),
            "backward_ms": statistics.median(backward_times),
            "step_ms": statistics.median(step_times)}),
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
