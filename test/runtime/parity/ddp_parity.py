"""PyTorch's own DistributedDataParallel on Gloo, the reference for
test_data_parallel_parity.cpp.

Reads the initial weights (init.bin) and the global batches (batch<k>.bin)
the C++ test wrote into --dir, trains the same model on --world-size
processes with torch.nn.parallel.DistributedDataParallel, and writes rank 0's
final parameters to torch_final.bin (every rank's to torch_final_rank<r>.bin).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensor_file  # noqa: E402


class ConvNet(nn.Module):
    """The same layers and names as ConvNetImpl in the C++ test."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(6 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def worker(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
        world_size=args.world_size)
    model = ConvNet()
    init = tensor_file.read(os.path.join(args.dir, "init.bin"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(init[name])
    ddp_model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for step in range(args.steps):
        batch = tensor_file.read(os.path.join(args.dir, f"batch{step}.bin"))
        x, y = batch["x"], batch["y"]
        b = x.shape[0] // args.world_size
        x, y = x[rank * b:(rank + 1) * b], y[rank * b:(rank + 1) * b]
        opt.zero_grad()
        F.mse_loss(ddp_model(x), y).backward()
        opt.step()
    final = dict(model.named_parameters())
    tensor_file.write(os.path.join(args.dir, f"torch_final_rank{rank}.bin"), final)
    dist.barrier()
    dist.destroy_process_group()


def main():
    # Which PyTorch this is: the C++ test checks it is its LibTorch's version.
    print(f"reference torch {torch.__version__}", flush=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
