"""`make bench-peer`: linea's training steps next to PyTorch's on the same models (torch_models.py).

For each model (the ViT of `vit_fmnist --bench`, the char-GPT of `char_lm --bench`) and attention
kind, runs linea's benchmark, the PyTorch script in eager mode and the same script under
torch.compile in alternation (the order flips every round), each in a fresh process with the same
thread count and OpenMP wait settings, and prints the median over the rounds of each side's
median step time, the median compile time, and best PyTorch / linea (the faster of eager and
compiled over linea).

  python3 bench/peer/run.py [--build build] [--steps 20] [--rounds 3] [--threads 2] [--no-compile]
                            [--precision fp32|bf16] [--torch-precision fp32|bf16] [--device cpu|cuda]

torch.compile (torch_models.py --compile): torch.compile(model) for forward and backward, and the
gradient clipping plus AdamW step compiled as one function (PyTorch's recipe for compiling
opt.step()). Each compiled run warms up until a step compiles nothing new and only then times;
its compile time (the warm-up's wall time beyond that many steady steps) is reported on its own,
never in the step times. Inductor writes C++ on the CPU and needs a C++ compiler; its on-disk cache
makes later rounds compile faster than the first. Where compiling fails, that row's compiled column
says `failed: <reason>` and best PyTorch is eager. --no-compile skips the compiled runs (the column
says `skipped`), for a quick comparison.

--precision bf16 runs linea with bf16 dot products (`--precision bf16`); PyTorch stays float32
unless --torch-precision bf16 (its bf16 autocast). --device cuda runs both sides on the GPU.

Instruction sets: LINEA_CPU_ISA=avx2 caps linea's kernels; MKL_ENABLE_INSTRUCTIONS=AVX2
ONEDNN_MAX_CPU_ISA=AVX2 cap PyTorch's MKL and oneDNN, and ATEN_CPU_CAPABILITY=avx2 its own ATen
kernels and the vector code torch.compile generates. The header prints each of them that is set,
with the ISA PyTorch's ATen kernels use.

Without PyTorch it says how to install it and exits 0 (--check: exits 1).
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
    out = run(torch_cmd(model, kind, a), env)
    m = re.search(r"params (\d+) step_ms_median ([\d.]+)", out)
    if not m:
        sys.exit(f"bench-peer: unexpected output from torch_models.py:\n{out}")
    return float(m.group(2)), int(m.group(1))


def torch_cmd(model, kind, a):
    return [sys.executable, os.path.join(HERE, "torch_models.py"), "--model", model, "--attn", kind,
            "--bench", str(a.steps), "--threads", str(a.threads), "--precision", a.torch_precision,
            "--device", a.device]


def one_line(text, limit=120):
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def compiled_step(model, kind, a, env):
    """torch_models.py --compile: (step ms, params, compile s, inductor ISA), or a string saying why it failed."""
    try:
        p = subprocess.run(torch_cmd(model, kind, a) + ["--compile"], env=env, capture_output=True, text=True,
                           timeout=600)
    except subprocess.TimeoutExpired:
        return "timed out after 600 s"
    m = re.search(r"params (\d+) step_ms_median ([\d.]+) compile_s ([\d.]+) inductor_isa (\S+)", p.stdout)
    if p.returncode == 0 and m:
        return float(m.group(2)), int(m.group(1)), float(m.group(3)), m.group(4).replace("+", " ")
    m = re.search(r"^compile_failed (.*)$", p.stdout, re.M)
    if m:
        return one_line(m.group(1))
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if re.match(r"\s*[\w.]*(Error|Exception)\b", l)]
    return one_line((errors or lines or [f"exit status {p.returncode}"])[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="linea's build directory (examples/ inside)")
    ap.add_argument("--steps", type=int, default=20,
                    help="timed steps per run (after 3 warm-ups; torch.compile's: until a step compiles nothing new)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side per row, alternating")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="linea's matmul dot products")
    ap.add_argument("--torch-precision", choices=["fp32", "bf16"], default="fp32",
                    help="PyTorch's (bf16: torch.autocast)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where both sides train")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="skip the torch.compile column (no compilation: a quick run)")
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
    shown = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LINEA_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
             "ATEN_CPU_CAPABILITY")
    waits = ", ".join(f"{k}={env[k]}" for k in shown if k in env)
    try:
        aten = f"PyTorch's ATen kernels {torch.backends.cpu.get_cpu_capability()}, "
    except Exception:
        aten = ""
    print(f"bench-peer: linea ({a.build}) vs PyTorch {torch.__version__} on {a.device}, {a.threads} threads, "
          f"{waits}, {aten}{a.steps} timed steps per run, {a.rounds} rounds, linea {a.precision} / PyTorch "
          f"{a.torch_precision} matmuls, torch.compile {'on' if a.compile else 'skipped (--no-compile)'}; "
          f"load average {open('/proc/loadavg').read().split()[0]} at the start", flush=True)
    rows, isas = [], set()
    for model, exe, label in MODELS:
        path = os.path.join(a.build, "examples", exe)
        if not os.access(path, os.X_OK):
            sys.exit(f"bench-peer: {path} not found; build it first (make bench-peer does)")
        for kind in KINDS:
            lt, tt, ct, cs = [], [], [], []
            failed = None if a.compile else "skipped"
            for r in range(a.rounds):
                sides = [("linea", lambda: linea_step(path, kind, a, env)),
                         ("torch", lambda: torch_step(model, kind, a, env))]
                if not failed:
                    sides.append(("compiled", lambda: compiled_step(model, kind, a, env)))
                if r % 2:
                    sides.reverse()
                for side, f in sides:
                    res = f()
                    if side == "linea":
                        lt.append(res[0])
                        lp = res[1]
                    elif side == "torch":
                        tt.append(res[0])
                        tp = res[1]
                    elif isinstance(res, str):
                        failed = f"failed: {res}"
                    else:
                        ct.append(res[0])
                        cs.append(res[2])
                        isas.add(res[3])
            compiled = None if failed else (statistics.median(ct), statistics.median(cs))
            rows.append((f"{label} {kind}", statistics.median(lt), statistics.median(tt), compiled, failed, lp, tp))
            progress = (f"  {label} {kind}: linea {' '.join(f'{t:.1f}' for t in lt)} ms, "
                        f"PyTorch {' '.join(f'{t:.1f}' for t in tt)} ms")
            if ct and not failed:
                progress += (f", torch.compile {' '.join(f'{t:.1f}' for t in ct)} ms "
                             f"(compiling {' '.join(f'{t:.1f}' for t in cs)} s)")
            elif a.compile:
                progress += f", torch.compile {failed}"
            print(progress, flush=True)
    print(f"\n| step (median ms) | linea {a.precision} | PyTorch {torch.__version__} eager {a.torch_precision} "
          f"| torch.compile {a.torch_precision} | compile s | best PyTorch / linea | parameters (linea / PyTorch) |")
    print("|---|---|---|---|---|---|---|")
    for name, l, t, compiled, failed, lp, tp in rows:
        same = "" if lp == tp else " **differ**"
        if compiled:
            c_ms, c_s = f"{compiled[0]:.1f}", f"{compiled[1]:.1f}"
            best, which = min((t, "eager"), (compiled[0], "compiled"))
        else:
            c_ms, c_s = failed, "-"
            best, which = t, "eager"
        print(f"| {name} | {l:.1f} | {t:.1f} | {c_ms} | {c_s} | {best / l:.2f}x ({which}) | {lp} / {tp}{same} |")
    if isas and a.device == "cpu":
        print(f"\ntorch.compile's generated C++ is vectorised for: {', '.join(sorted(isas))}")
    print(f"\nload average {open('/proc/loadavg').read().split()[0]} at the end")


if __name__ == "__main__":
    main()
