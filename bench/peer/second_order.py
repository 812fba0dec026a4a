"""linea's WGAN-GP gradients (examples/second_order.cpp, part b) against PyTorch's, in float64.

  build/examples/second_order --dump DIR
  python3 bench/peer/second_order.py DIR

Loads the inputs (real, fake, alpha, lambda), the critic's weights (w1, b1, w2, b2) and linea's
loss and gradients (grad_*), builds the same critic D(x) = w2 · tanh(w1 x + b1) + b2 in PyTorch,
computes L = mean D(fake) - mean D(real) + lambda · mean(‖∂D(x̂)/∂x̂‖₂ - 1)², x̂ = alpha · real +
(1 - alpha) · fake, with torch.autograd.grad(create_graph=True) for the penalty's gradient, and
prints the largest absolute difference per tensor. Exits 1 if any exceeds 1e-10.
"""
import ast
import os
import struct
import sys

import torch

LIMIT = 1e-10
NAMES = ["w1", "b1", "w2", "b2", "fake"]


def load_npy(path):
    """A float64 C-order .npy file (what linea's save_npy writes for float64) as a tensor; read
    here rather than with NumPy so that PyTorch is the one thing this check needs."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            sys.exit(f"{path}: not a .npy file")
        major = f.read(2)[0]
        size = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = ast.literal_eval(f.read(size).decode("latin1"))
        if header["descr"] != "<f8" or header["fortran_order"]:
            sys.exit(f"{path}: expected a C-order float64 array, got {header}")
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.float64).reshape(header["shape"]).clone()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/peer/second_order.py DIR   (DIR from `second_order --dump DIR`)")
    folder = sys.argv[1]

    def load(name):
        return load_npy(os.path.join(folder, name + ".npy"))

    real, alpha, lam = load("real"), load("alpha"), load("lambda").item()
    w = [load(n).requires_grad_() for n in NAMES[:4]]
    fake = load("fake").requires_grad_()

    def critic(x):
        return torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x, w[0], w[1])), w[2], w[3])

    mixed = alpha * real + (1 - alpha) * fake
    (dmixed,) = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    penalty = ((dmixed.pow(2).sum(1).sqrt() - 1) ** 2).mean()
    loss = critic(fake).mean() - critic(real).mean() + lam * penalty
    grads = torch.autograd.grad(loss, w + [fake])

    worst = abs(loss.item() - load("loss").item())
    print(f"{'tensor':<10} {'max |linea - torch|':>20}")
    print(f"{'loss':<10} {worst:>20.3e}")
    for name, g in zip(NAMES, grads):
        diff = (g.detach() - load("grad_" + name)).abs().max().item()
        worst = max(worst, diff)
        print(f"{'grad_' + name:<10} {diff:>20.3e}")
    print(f"largest difference {worst:.3e} (limit {LIMIT:g}), torch {torch.__version__}")
    sys.exit(0 if worst <= LIMIT else 1)


if __name__ == "__main__":
    main()
