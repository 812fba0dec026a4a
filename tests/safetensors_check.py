#!/usr/bin/env python3
"""Cross-check of linea's safetensors files against the reference `safetensors` package.

  safetensors_check.py read  FILE NPY_DIR [KEY=VALUE ...]  FILE (written by linea) must hold exactly
      the tensors NPY_DIR/<name>.npy, bit for bit, and the given metadata.
  safetensors_check.py write FILE NPY_DIR                  writes FILE with safetensors and each of
      its tensors as NPY_DIR/<name>.npy, for linea to read back.

Exit status 0 on success; mismatches are printed.
"""
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def read(path, npy_dir, expected_meta):
    got = load_file(path)
    want = {f[:-4]: np.load(os.path.join(npy_dir, f)) for f in os.listdir(npy_dir) if f.endswith(".npy")}
    errors = []
    if sorted(got) != sorted(want):
        errors.append(f"names differ: {sorted(got)} vs {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        a, b = got[name], want[name]
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            errors.append(f"{name}: {a.dtype}{a.shape} differs from {b.dtype}{b.shape}")
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata() or {}
    for kv in expected_meta:
        k, v = kv.split("=", 1)
        if meta.get(k) != v:
            errors.append(f"metadata {k!r}: {meta.get(k)!r}, expected {v!r}")
    return errors


def write(path, npy_dir):
    os.makedirs(npy_dir, exist_ok=True)
    tensors = {
        "f32": np.array([[0.0, -0.0, 1.5, np.inf], [-np.inf, np.nan, 1e-45, 3.4e38]], dtype=np.float32),
        "f64": (np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0),
        "i64": np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], dtype=np.int64),
        "u8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "bool": np.array([[True, False, True], [False, False, True]]),
        "layer.0.weight": np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4),
        "scalar": np.array(2.5, dtype=np.float64),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    save_file(tensors, path, metadata={"who": "python"})
    for name, t in tensors.items():
        np.save(os.path.join(npy_dir, name + ".npy"), t)
    return []


def main(argv):
    if len(argv) < 4 or argv[1] not in ("read", "write"):
        print(__doc__)
        return 2
    errors = read(argv[2], argv[3], argv[4:]) if argv[1] == "read" else write(argv[2], argv[3])
    for e in errors:
        print("safetensors_check:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
