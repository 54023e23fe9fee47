"""PyTorch's own DistributedDataParallel at world size 1 on one device: the
milliseconds per training step of the MLP that ddp_gpu_check's `bench` mode
trains (same layers, batch and optimizer), for scripts/gpu-check.sh.

    python3 torch_ddp_step.py --device cuda|cpu [--steps N]
Prints "RESULT torch_bench ok=1 backend=... device=... steps=N ms_per_step=X".
"""
import argparse
import socket
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    device = torch.device("cuda:0" if cuda else "cpu")
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}",
                            rank=0, world_size=1)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                          nn.ReLU(), nn.Linear(1024, 10)).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(64, 512, device=device)
    y = torch.randint(0, 10, (64,), device=device)

    def step():
        opt.zero_grad()
        F.nll_loss(F.log_softmax(ddp(x), 1), y).backward()
        opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(10):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    ms = (time.perf_counter() - start) * 1000 / args.steps
    print(f"RESULT torch_bench ok=1 backend={backend} device={device} "
          f"steps={args.steps} ms_per_step={ms:.3f} torch={torch.__version__}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
