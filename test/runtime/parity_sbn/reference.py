#!/usr/bin/python3
"""Reference for test_sync_batch_norm_parity: PyTorch (python3-torch) over the
global batch in one process.

PyTorch 1.13's torch.nn.SyncBatchNorm refuses CPU tensors ("SyncBatchNorm
expected input tensor to be on GPU") and its batch_norm_stats kernel exists
only for CUDA, so on a CPU-only machine the reference is PyTorch's plain
BatchNorm2d over the concatenated global batch -- what SyncBatchNorm computes
by definition -- run by Python's torch, independently of the C++ code under
test. When a CUDA build of torch is present the script says so, but keeps
this reference so that results do not depend on the machine.

Usage: reference.py DIR. DIR holds meta.txt and tensors written by the C++
test; the script writes ref_*.t files next to them.

Tensor files: b"DDPT", uint32 ndim, int64 dims[ndim], float32 data, all
little-endian.
"""
import struct
import sys

import torch


def read_tensor(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"DDPT":
        raise SystemExit(f"{path}: not a DDPT tensor file")
    (ndim,) = struct.unpack_from("<I", data, 4)
    dims = struct.unpack_from(f"<{ndim}q", data, 8)
    offset = 8 + 8 * ndim
    count = 1
    for d in dims:
        count *= d
    values = struct.unpack_from(f"<{count}f", data, offset)
    return torch.tensor(values, dtype=torch.float32).reshape(dims)


def write_tensor(path, tensor):
    t = tensor.detach().to(torch.float32).contiguous().reshape(-1)
    dims = list(tensor.shape)
    with open(path, "wb") as f:
        f.write(b"DDPT")
        f.write(struct.pack("<I", len(dims)))
        f.write(struct.pack(f"<{len(dims)}q", *dims))
        f.write(struct.pack(f"<{t.numel()}f", *t.tolist()))


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: reference.py DIR")
    d = sys.argv[1]
    meta = {}
    with open(f"{d}/meta.txt") as f:
        for line in f:
            key, value = line.split()
            meta[key] = value
    channels = int(meta["channels"])
    steps = int(meta["steps"])
    lr = float(meta["lr"])
    bn = torch.nn.BatchNorm2d(channels, eps=float(meta["eps"]),
                              momentum=float(meta["momentum"]))
    # Record why torch.nn.SyncBatchNorm itself is not the reference here.
    try:
        torch.nn.SyncBatchNorm(channels)(torch.randn(4, channels, 2, 2))
        print("note: torch.nn.SyncBatchNorm accepted a CPU tensor; the "
              "reference stays plain BatchNorm2d over the global batch")
    except ValueError as e:
        print(f"note: torch.nn.SyncBatchNorm on CPU: {e}; reference is "
              "BatchNorm2d over the global batch")
    with torch.no_grad():
        bn.weight.copy_(read_tensor(f"{d}/weight0.t"))
        bn.bias.copy_(read_tensor(f"{d}/bias0.t"))
    bn.train()
    for k in range(steps):
        x = read_tensor(f"{d}/x{k}.t").requires_grad_()
        g = read_tensor(f"{d}/g{k}.t")
        y = bn(x)
        (y * g).sum().backward()
        write_tensor(f"{d}/ref_y{k}.t", y)
        write_tensor(f"{d}/ref_dx{k}.t", x.grad)
        with torch.no_grad():
            bn.weight -= lr * bn.weight.grad
            bn.bias -= lr * bn.bias.grad
        bn.weight.grad = None
        bn.bias.grad = None
    write_tensor(f"{d}/ref_weight.t", bn.weight)
    write_tensor(f"{d}/ref_bias.t", bn.bias)
    write_tensor(f"{d}/ref_running_mean.t", bn.running_mean)
    write_tensor(f"{d}/ref_running_var.t", bn.running_var)
    print(f"reference: torch {torch.__version__}, {steps} steps, "
          f"batches tracked {int(bn.num_batches_tracked)}")


if __name__ == "__main__":
    main()
