#!/usr/bin/env python3
"""Writes a synthetic MNIST in the idx format LibTorch's reader expects.

LibTorch's MNIST dataset insists on the real image counts (60000 training,
10000 test images of 28x28). The images here are learnable: each class is a
bright bar at its own place plus noise, so a convnet's loss falls quickly.

    make_synthetic_mnist.py OUT_DIR [--seed N]
"""
import argparse
import os
import struct
import sys

import numpy as np


def make_split(count, rng):
    labels = rng.integers(0, 10, size=count, dtype=np.uint8)
    images = rng.integers(0, 60, size=(count, 28, 28), dtype=np.uint8)
    rows = 3 + 2 * labels  # rows 3..21: one bar position per class
    for offset in range(3):
        images[np.arange(count), rows + offset, 4:24] = 230
    return images, labels


def write_idx(path, magic, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack(">i", magic))
        for dim in array.shape:
            f.write(struct.pack(">i", dim))
        f.write(array.tobytes())
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for prefix, count in (("train", 60000), ("t10k", 10000)):
        images, labels = make_split(count, rng)
        write_idx(os.path.join(args.out_dir, prefix + "-images-idx3-ubyte"),
                  2051, images)
        write_idx(os.path.join(args.out_dir, prefix + "-labels-idx1-ubyte"),
                  2049, labels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
