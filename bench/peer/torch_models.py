"""The two models linea's step benchmarks train, written in plain PyTorch (eager), to time the
same training step in both frameworks (bench/peer/run.py runs them side by side).

  python3 bench/peer/torch_models.py --model vit --attn mhla --bench 20 --threads 2

- vit: `vit_fmnist --bench`'s ViT. Images [128, 1, 32, 32] cut into 8x8 patches (16 tokens,
  block-major: 2x2 blocks of 2x2 tokens), learned positions, 4 pre-LN blocks (width 64, 4 heads,
  MLP ratio 2, GELU), mean over tokens, LayerNorm, linear head to 10 classes; cross-entropy
  with label smoothing 0.1; AdamW, grad-norm clipping at 1 (the ViT recipe's default). Attention
  non-causal.
- gpt: `char_lm --bench`'s character GPT (nanoGPT's baby config): vocabulary 65, context 64,
  batch 12, 4 layers, 4 heads, width 128, MLP ratio 4, biases, head tied to the token embedding;
  AdamW, grad-norm clipping at 1. Attention causal.

Attention, as linea computes it (docs/mhla-spec.md), from the same qkv projection:
- softmax: F.scaled_dot_product_attention (PyTorch's fused kernel).
- linear: φ = relu + 1e-6, o = φ(q) Σ φ(k)ᵀ[v|1], numerator over normaliser (+1e-6); causal in
  chunks of 64 tokens (one chunk at context 64): the masked quadratic form inside a chunk plus the
  running sums of the earlier chunks.
- mhla: non-causal (spec §1): M = 4 blocks (4 tokens each in the ViT), block summaries S'_b = φ(K_b)ᵀ[V_b|1] mixed by the
  learnable M x M matrix (clamped to [0, 1] after each step), φ = relu + 1e-6. Causal (spec §3):
  chunks of 16, φ = relu, scale d^-1/2, O_i = s φQ_i Σ_{j<i} W_ij S_j + W_ii ((s φQ_i φK_iᵀ) ∘ mask) V_i,
  then an RMSNorm per head; the mix is projected to tril(clamp(W, 1e-5, 1)) after each step.

--precision bf16 runs the forward under torch.autocast(device, dtype=torch.bfloat16) (PyTorch's
bf16 autocast: matmuls and linear layers in bf16, through oneDNN on the CPU, the rest float32),
the nearest PyTorch has to linea's `--precision bf16`.

--device cuda builds everything on the GPU (torch.set_default_device) and synchronises it before
each clock read, as linea's `--device cuda --bench` does.

--compile times the same step with torch.compile: the model through torch.compile(model) (forward
and, through AOTAutograd, backward), and the gradient clipping plus AdamW's step in one function
under torch.compile, as PyTorch's "Compiling the optimizer with torch.compile" recipe does for
opt.step() (zero_grad, loss.item() and the mix projection stay eager). On the CPU inductor emits
C++ (it needs a C++ compiler, g++ here) vectorised for the ISA ATEN_CPU_CAPABILITY names, else
the best this CPU has. It warms up until a step compiles nothing new (at least 3 steps), then
times; `compile_s` is the warm-up's wall time beyond that many steady steps (inductor's on-disk
cache, /tmp/torchinductor_$USER, makes a repeat run's compile shorter). If compiling fails it
prints `compile_failed <reason>` and exits 3.

Prints one line: `params N step_ms_median X` (plus `compile_s S inductor_isa I` with --compile, and
the individual times with --verbose).
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6


def phi_relu_eps(x):
    return F.relu(x) + EPS


def ones_col(v):
    return torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)


def normalise(u):
    return u[..., :-1] / (u[..., -1:] + EPS)


def linear_attention(q, k, v, causal, chunk=64):
    q, k, vv = phi_relu_eps(q), phi_relu_eps(k), ones_col(v)
    if not causal:
        return normalise(q @ (k.transpose(-1, -2) @ vv))
    B, H, N, d = q.shape
    C = min(chunk, N)
    M = N // C
    qc, kc, vc = (t.reshape(B, H, M, C, t.shape[-1]) for t in (q, k, vv))
    s = kc.transpose(-1, -2) @ vc                        # [B, H, M, d, dv+1] chunk summaries
    prefix = torch.cumsum(s, dim=2) - s                  # Σ_{j<i} S_j
    mask = torch.ones(C, C, dtype=torch.bool).tril()
    a = (qc @ kc.transpose(-1, -2)).masked_fill(~mask, 0)
    u = qc @ prefix + a @ vc
    return normalise(u).reshape(B, H, N, -1)


def mhla_noncausal(q, k, v, mix):
    B, H, N, d = q.shape
    M = mix.shape[0]
    L = N // M
    q, k, vv = phi_relu_eps(q), phi_relu_eps(k), ones_col(v)
    kb, vb, qb = k.reshape(B, H, M, L, d), vv.reshape(B, H, M, L, -1), q.reshape(B, H, M, L, d)
    s = kb.transpose(-1, -2) @ vb                        # S'_b [B, H, M, d, dv+1]
    sh = torch.einsum("ij,bhjxy->bhixy", mix, s)         # Ŝ'_i = Σ_j W_ij S'_j
    return normalise(qb @ sh).reshape(B, H, N, -1)


def mhla_causal(q, k, v, mix, chunk):
    B, H, N, d = q.shape
    M = N // chunk
    scale = d ** -0.5
    q, k = F.relu(q), F.relu(k)
    qc, kc, vc = (t.reshape(B, H, M, chunk, t.shape[-1]) for t in (q, k, v))
    s = kc.transpose(-1, -2) @ vc                        # S_j [B, H, M, d, dv]
    w = mix[:M, :M]
    p = torch.einsum("ij,bhjxy->bhixy", w.tril(-1), s)   # P_i = Σ_{j<i} W_ij S_j
    mask = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    a = (qc @ kc.transpose(-1, -2)).masked_fill(~mask, 0) * w.diagonal().view(1, 1, M, 1, 1)
    return (scale * (qc @ p + a @ vc)).reshape(B, H, N, -1)


def causal_mix(m):
    return torch.tril(torch.ones(m, m)) / torch.arange(1, m + 1, dtype=torch.float32).view(m, 1)


def block_distance_mix(grid):
    """linea's block_distance_mix(grid, Linear): 1 - distance / max distance, columns normalised."""
    idx = torch.arange(grid * grid)
    r, c = (idx // grid).float(), (idx % grid).float()
    dist = torch.sqrt((r.view(-1, 1) - r.view(1, -1)) ** 2 + (c.view(-1, 1) - c.view(1, -1)) ** 2)
    m = 1 - dist / dist.max().clamp(min=1)
    return m / m.sum(dim=0, keepdim=True)


class Attention(nn.Module):
    def __init__(self, dim, heads, kind, causal, n_tokens, grid=2, chunk=16):
        super().__init__()
        self.heads, self.kind, self.causal, self.chunk = heads, kind, causal, chunk
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        if kind == "mhla":
            if causal:
                self.mix = nn.Parameter(causal_mix(math.ceil(n_tokens / chunk)))
                self.out_norm = nn.RMSNorm(dim // heads, eps=1e-6)
            else:
                self.mix = nn.Parameter(block_distance_mix(grid))

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        if self.kind == "softmax":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        elif self.kind == "linear":
            o = linear_attention(q, k, v, self.causal)
        elif self.causal:
            o = self.out_norm(mhla_causal(q, k, v, self.mix, self.chunk))
        else:
            o = mhla_noncausal(q, k, v, self.mix)
        return self.proj(o.transpose(1, 2).reshape(B, N, C))

    @torch.no_grad()
    def project_mix(self):
        if self.kind == "mhla":
            self.mix.copy_(self.mix.clamp(1e-5, 1).tril() if self.causal else self.mix.clamp(0, 1))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, kind, causal, n_tokens):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, kind, causal, n_tokens)
        hidden = round(mlp_ratio * dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, kind, dim=64, depth=4, heads=4, mlp_ratio=2, patch=8, block=2, img=32):
        super().__init__()
        self.patch, self.block, self.grid = patch, block, img // patch
        self.proj = nn.Linear(patch * patch, dim)
        self.pos = nn.Parameter(torch.randn(1, self.grid ** 2, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_ratio, kind, False, self.grid ** 2)
                                      for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        B, p, b, nb = x.shape[0], self.patch, self.block, self.grid // self.block
        # linea's PatchEmbed: block-major tokens, each token's pixels in conv-kernel order.
        t = x.reshape(B, 1, nb, b, p, nb, b, p).permute(0, 2, 5, 3, 6, 1, 4, 7).reshape(B, self.grid ** 2, p * p)
        h = self.blocks(self.proj(t) + self.pos)
        return self.head(self.norm(h.mean(dim=1)))


class GPT(nn.Module):
    def __init__(self, kind, vocab=65, context=64, layers=4, heads=4, dim=128, mlp_ratio=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_ratio, kind, True, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.ln_f(self.blocks(h)) @ self.tok.weight.t()  # tied head


def no_decay(name, p):
    return p.dim() < 2 or name.endswith("mix") or name == "pos" or name.startswith("pos.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["vit", "gpt"], required=True)
    ap.add_argument("--attn", choices=["softmax", "linear", "mhla"], required=True)
    ap.add_argument("--bench", type=int, default=20, help="timed steps (after 3 warm-ups)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model and the optimizer step")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_models.py --device cuda: PyTorch sees no CUDA device here")
    torch.set_default_device(a.device)  # the models' parameters, masks and inputs
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    if a.model == "vit":
        model, batch = ViT(a.attn), 128
        x, y = torch.randn(batch, 1, 32, 32), torch.randint(0, 10, (batch,))
        wd, clip, smoothing = 0.05, 1.0, 0.1
        loss_fn = lambda: F.cross_entropy(fwd(x), y, label_smoothing=smoothing)
    else:
        model, batch = GPT(a.attn), 12
        x, y = torch.randint(0, 65, (batch, 64)), torch.randint(0, 65, (batch, 64))
        wd, clip = 0.1, 1.0
        loss_fn = lambda: F.cross_entropy(fwd(x).view(-1, 65), y.view(-1))
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if not no_decay(n, p)], "weight_decay": wd},
              {"params": [p for n, p in named if no_decay(n, p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99 if a.model == "gpt" else 0.999))
    attns = [m for m in model.modules() if isinstance(m, Attention)]

    def update():
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()

    fwd = model
    if a.compile:
        fwd = torch.compile(model)
        update = torch.compile(update)

    def step():
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_fn()
        loss.item()
        loss.backward()
        update()
        opt.zero_grad(set_to_none=True)
        for m in attns:
            m.project_mix()

    def timed_step():
        sync()
        t = time.perf_counter()
        step()
        sync()
        return (time.perf_counter() - t) * 1e3

    warm = []
    if a.compile:
        try:
            from torch._dynamo.utils import counters
            graphs = lambda: counters["stats"]["unique_graphs"]
            graphs()
        except Exception:  # private API: without it, a fixed warm-up of 10 steps
            graphs = None
        try:
            while len(warm) < 30:
                before = graphs() if graphs else None
                warm.append(timed_step())
                if len(warm) >= (3 if graphs else 10) and (graphs is None or graphs() == before):
                    break
        except Exception as e:
            why = " ".join(f"{type(e).__name__}: {e}".split())
            print(f"compile_failed {why[:300]}", flush=True)
            sys.exit(3)
    else:
        for _ in range(3):
            step()
    times = [timed_step() for _ in range(a.bench)]
    median = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    line = f"params {params} step_ms_median {median:.2f}"
    if a.compile:
        try:
            from torch._inductor.cpu_vec_isa import pick_vec_isa
            isa = (str(pick_vec_isa()) or "none") if a.device == "cpu" else a.device
        except Exception:
            isa = "unknown"
        compile_s = max(0.0, (sum(warm) - len(warm) * median) / 1e3)
        line += f" compile_s {compile_s:.2f} inductor_isa {isa.replace(' ', '+')}"
    print(line)
    if a.verbose:
        if warm:
            print("warm-up ms:", " ".join(f"{t:.1f}" for t in warm))
        print("step ms:", " ".join(f"{t:.1f}" for t in times))


if __name__ == "__main__":
    main()
