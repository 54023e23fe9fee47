"""Reads and writes the tensor files exchanged with the C++ tests.

Format (little endian): b"DDPT", uint32 count, then per tensor: uint32 name
length, name bytes (UTF-8), uint32 ndim, int64 sizes[ndim], float32 data.
"""
import struct

import torch

MAGIC = b"DDPT"


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not a DDPT tensor file")
    (count,) = struct.unpack_from("<I", data, 4)
    pos = 8
    tensors = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos:pos + name_len].decode()
        pos += name_len
        (ndim,) = struct.unpack_from("<I", data, pos)
        pos += 4
        sizes = struct.unpack_from(f"<{ndim}q", data, pos)
        pos += 8 * ndim
        numel = 1
        for s in sizes:
            numel *= s
        flat = torch.frombuffer(bytearray(data[pos:pos + 4 * numel]),
                                dtype=torch.float32)
        pos += 4 * numel
        tensors[name] = flat.reshape(sizes).clone()
    return tensors


def write(path, tensors):
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<I", len(tensors)))
        for name, t in tensors.items():
            t = t.detach().to(torch.float32).contiguous()
            encoded = name.encode()
            f.write(struct.pack("<I", len(encoded)))
            f.write(encoded)
            f.write(struct.pack("<I", t.dim()))
            f.write(struct.pack(f"<{t.dim()}q", *t.shape))
            f.write(_tensor_bytes(t))


def _tensor_bytes(t):
    try:
        return t.numpy().astype("<f4").tobytes()
    except (ImportError, RuntimeError):
        flat = t.flatten()
        return struct.pack(f"<{flat.numel()}f", *flat.tolist())
