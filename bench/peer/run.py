"""`make bench-peer`: linea's training steps next to PyTorch's on the same models (torch_models.py).

For each model (the ViT of `vit_fmnist --bench`, the char-GPT of `char_lm --bench`) and attention
kind, runs linea's benchmark and the PyTorch script in alternation (which one goes first flips
every round), each in a fresh process with the same thread count and OpenMP wait settings, and
prints the median over the rounds of each side's median step time, and PyTorch / linea.

  python3 bench/peer/run.py [--build build] [--steps 20] [--rounds 3] [--threads 2]
                            [--precision fp32|bf16] [--torch-precision fp32|bf16] [--device cpu|cuda]

--precision bf16 runs linea with bf16 dot products (`--precision bf16`); PyTorch stays float32
unless --torch-precision bf16 (its bf16 autocast). --device cuda runs both sides on the GPU.

Without PyTorch it says how to install it and exits 0.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["softmax", "linear", "mhla"]
MODELS = [("vit", "vit_fmnist", "ViT-FMNIST"), ("gpt", "char_lm", "char-GPT")]


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench-peer: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def linea_step(exe, kind, a, env):
    out = run([exe, "--bench", str(a.steps), "--attn", kind, "--threads", str(a.threads), "--precision", a.precision,
               "--device", a.device], env)
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == kind:
            return float(f[1]), int(f[-1])  # step ms, params (bench_steps.h's row)
    sys.exit(f"bench-peer: no '{kind}' row in the output of {exe}:\n{out}")


def torch_step(model, kind, a, env):
    out = run([sys.executable, os.path.join(HERE, "torch_models.py"), "--model", model, "--attn", kind,
               "--bench", str(a.steps), "--threads", str(a.threads), "--precision", a.torch_precision,
               "--device", a.device], env)
    m = re.search(r"params (\d+) step_ms_median ([\d.]+)", out)
    if not m:
        sys.exit(f"bench-peer: unexpected output from torch_models.py:\n{out}")
    return float(m.group(2)), int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="linea's build directory (examples/ inside)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run (after 3 warm-ups)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side per row, alternating")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="linea's matmul dot products")
    ap.add_argument("--torch-precision", choices=["fp32", "bf16"], default="fp32",
                    help="PyTorch's (bf16: torch.autocast)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where both sides train")
    ap.add_argument("--check", action="store_true", help="only say whether PyTorch is importable (exit 0 / 1)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench-peer: PyTorch is not installed, so there is nothing to compare with.\n"
              "Install it with `pip install torch` (CPU wheels: pip install torch --index-url "
              "https://download.pytorch.org/whl/cpu) and run `make bench-peer` again.")
        sys.exit(1 if a.check else 0)
    if a.check:
        return
    env = dict(os.environ)
    # What make train uses; both sides get the same (pip's torch runs on libgomp too).
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        env["GOMP_SPINCOUNT"] = "1000"
    waits = ", ".join(f"{k}={env[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in env)
    print(f"bench-peer: linea ({a.build}) vs PyTorch {torch.__version__} on {a.device}, {a.threads} threads, "
          f"{waits}, {a.steps} timed steps per run, {a.rounds} rounds, linea {a.precision} / PyTorch "
          f"{a.torch_precision} matmuls; "
          f"load average {open('/proc/loadavg').read().split()[0]} at the start", flush=True)
    rows = []
    for model, exe, label in MODELS:
        path = os.path.join(a.build, "examples", exe)
        if not os.access(path, os.X_OK):
            sys.exit(f"bench-peer: {path} not found; build it first (make bench-peer does)")
        for kind in KINDS:
            lt, tt = [], []
            for r in range(a.rounds):
                sides = [("linea", lambda: linea_step(path, kind, a, env)), ("torch", lambda: torch_step(model, kind, a, env))]
                if r % 2:
                    sides.reverse()
                for side, f in sides:
                    ms, params = f()
                    (lt if side == "linea" else tt).append(ms)
                    if side == "linea":
                        lp = params
                    else:
                        tp = params
            rows.append((f"{label} {kind}", statistics.median(lt), statistics.median(tt), lp, tp))
            print(f"  {label} {kind}: linea {' '.join(f'{t:.1f}' for t in lt)} ms, "
                  f"PyTorch {' '.join(f'{t:.1f}' for t in tt)} ms", flush=True)
    print(f"\n| step (median ms) | linea {a.precision} | PyTorch {torch.__version__} {a.torch_precision} | PyTorch / linea "
          f"| parameters (linea / PyTorch) |")
    print("|---|---|---|---|---|")
    for name, l, t, lp, tp in rows:
        same = "" if lp == tp else " **differ**"
        print(f"| {name} | {l:.1f} | {t:.1f} | {t / l:.2f}x | {lp} / {tp}{same} |")
    print(f"\nload average {open('/proc/loadavg').read().split()[0]} at the end")


if __name__ == "__main__":
    main()
