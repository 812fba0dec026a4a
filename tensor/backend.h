// The kernel interface: everything a device must implement so that tensors can live on it.
// The CPU backend (tensor/cpu/) implements it with loops + OpenMP + OpenBLAS; cuda/ implements it
// for the GPU. Nothing above tensor/ calls a device directly: ops find the backend of their
// operands' device with backend(device) and call these kernels.
//
// Conventions, so kernels stay simple:
// - `out` is always a fresh contiguous tensor allocated by the caller, with the right shape/dtype.
// - inputs may be arbitrary strided views (broadcast inputs have stride 0), already expanded to
//   the shape the kernel expects; all operands are on the kernel's device.
// The op enums (UnaryOp, BinaryOp, ReduceOp) and the elementwise formulas are in ops.h.
//
// Each kernel is a public non-virtual method, defined in backend.cpp, that checks its arguments
// once for every device (tensor/kernel_checks.h, fused_checks.h), times the call and counts its
// work while linea::Profiler records (profiler.h), and calls the protected virtual do_<method>
// with the same arguments, which a device implements. What is a device's own (its kernels'
// limits, operands on its device) it checks in its do_ body. Adding a method:
// docs/testing.md, "Adding a kernel-interface method".
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "linea/tensor/ops.h"
#include "linea/tensor/tensor.h"

namespace linea {

// The kernels every device implements, listed once: Backend declares them pure virtual
// (LINEA_BACKEND_KERNELS(= 0)), a device's backend class overrides them all
// (LINEA_BACKEND_KERNELS(override)). Each is its public method's kernel, same arguments.
#define LINEA_BACKEND_KERNELS(SPEC)                                                                                  \
  virtual std::shared_ptr<Storage> do_allocate(std::size_t nbytes) SPEC;                                             \
  virtual void do_copy_from_host(Storage& dst, std::size_t dst_byte_offset, const void* src, std::size_t nbytes)     \
      SPEC;                                                                                                          \
  virtual void do_copy_to_host(void* dst, const Storage& src, std::size_t src_byte_offset, std::size_t nbytes)       \
      SPEC;                                                                                                          \
  virtual void do_copy(const Tensor& src, const Tensor& dst) SPEC;                                                   \
  virtual void do_fill(const Tensor& dst, double value) SPEC;                                                        \
  virtual void do_unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) SPEC;                  \
  virtual void do_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) SPEC;                     \
  virtual void do_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) SPEC;               \
  virtual void do_random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) SPEC;                            \
  virtual void do_reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner)   \
      SPEC;                                                                                                          \
  virtual void do_softmax(const Tensor& x, const Tensor& out, bool log) SPEC;                                        \
  virtual void do_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) SPEC;              \
  virtual void do_cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner,                \
                         bool exclusive, bool reverse) SPEC;                                                         \
  virtual void do_index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) SPEC;             \
  virtual void do_index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) SPEC;              \
  virtual void do_gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) SPEC;                   \
  virtual void do_scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) SPEC;            \
  virtual void do_gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias,                       \
                       const Tensor& residual) SPEC;                                                                 \
  virtual void do_layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,           \
                                    const Tensor& out, const Tensor& mean, const Tensor& rstd) SPEC;                 \
  virtual void do_layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,     \
                                     const Tensor& rstd, const Tensor& dx, const Tensor& dweight,                    \
                                     const Tensor& dbias) SPEC;                                                      \
  virtual void do_rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,              \
                                  const Tensor& rstd) SPEC;                                                          \
  virtual void do_rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,      \
                                   const Tensor& dx, const Tensor& dweight) SPEC;                                    \
  virtual void do_cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index,                 \
                                        double label_smoothing, const Tensor& lse, const Tensor& loss,               \
                                        const Tensor& total) SPEC;                                                   \
  virtual void do_cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse,                   \
                                         const Tensor& weight, int64_t ignore_index, double label_smoothing,         \
                                         const Tensor& dx) SPEC;                                                     \
  virtual void do_adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) SPEC;    \
  virtual void do_sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) SPEC;                \
  virtual void do_sum_squares(const std::vector<Tensor>& xs, const Tensor& out) SPEC;                                \
  virtual void do_scale_all(const std::vector<Tensor>& xs, double factor) SPEC;                                      \
  virtual void do_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,    \
                                    const Tensor& out, const Tensor& lse, const Tensor& probs) SPEC;                 \
  virtual void do_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,           \
                                     const Tensor& lse, const Tensor& probs, const Tensor& dout, double scale,       \
                                     bool causal, const Tensor& dq, const Tensor& dk, const Tensor& dv) SPEC;                                                                                            \
  virtual void do_mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,                 \
                               const MHLAArgs& a, const Tensor& out, const Tensor& s, const Tensor& sh,              \
                               const Tensor& r) SPEC;                                                                \
  virtual void do_mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,                \
                                const MHLAArgs& a, const Tensor& out, const Tensor& s, const Tensor& sh,             \
                                const Tensor& r, const Tensor& grad, const Tensor& dq, const Tensor& dk,             \
                                const Tensor& dv, const Tensor& dmix) SPEC;

class Backend {
 public:
  virtual ~Backend() = default;
  DeviceType device_type() const { return type_; }  // of the tensors it holds (the optimizer steps check it)

  // ======== primitives: memory, elementwise, reductions, indexing, matrix multiply ========

  // ---- memory ----
  std::shared_ptr<Storage> allocate(std::size_t nbytes);
  void copy_from_host(Storage& dst, std::size_t dst_byte_offset, const void* src, std::size_t nbytes);
  void copy_to_host(void* dst, const Storage& src, std::size_t src_byte_offset, std::size_t nbytes);

  // ---- elementwise ----
  // dst[i] = cast(src[i]); same shape, any strides on both sides (dst may be a non-contiguous
  // view: this is how cat, contiguous() and dtype conversion write).
  void copy(const Tensor& src, const Tensor& dst);
  void fill(const Tensor& dst, double value);  // dst any strides
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0 = 0, double p1 = 0);
  // a and b are already broadcast to out's shape. For comparisons out is Bool; otherwise a, b and
  // out share one dtype.
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
  // y = f(x) and dydx = f'(x) for an activation op (has_activation_grad: GELU erf/tanh, SiLU), so
  // that its backward is the product g·dydx: f' costs about what f does (the same exp), and here
  // it comes from the evaluation of f instead of a second one in the backward. x any strides, y
  // and dydx contiguous, all of x's shape and floating dtype. The default is unary, then the op's
  // *Backward on a tensor of ones; the CPU evaluates both in one pass.
  void activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx);
  // Counter-based uniform numbers in [0, 1): out[i] = u(seed, offset + i), out contiguous float32
  // (24 random bits) or float64 (53). u is splitmix64 as a hash of (seed, counter)
  // (tensor/counter_rng.h), pure integer math: every device gives the same bits, and a caller
  // that advances offset by numel per call never reuses a number.
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset);

  // ---- reductions ----
  // x is contiguous and read as [outer, n, inner]; out is [outer, inner] (ArgMax writes int64).
  void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner);
  // Row-wise over the last dim of a contiguous x: out = softmax(x) or log_softmax(x), stable.
  void softmax(const Tensor& x, const Tensor& out, bool log);
  // Given y = softmax(x) (or log_softmax) and dy, write dx (all contiguous, same shape).
  void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log);
  // Running sum along the middle dim of x contiguous read as [outer, n, inner]; out likewise, same
  // dtype (float32, float64 or int64). Inclusive: out_i = Σ_{j<=i} x_j; exclusive: Σ_{j<i} x_j;
  // reverse sums from the end instead (Σ_{j>=i}, Σ_{j>i}). Accumulates in x's dtype, in j order.
  void cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse);

  // ---- indexing (idx is int64; indices are range-checked by the kernel) ----
  void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
  // out.narrow(dim, idx[i], 1) += src.select(dim, i), accumulating repeated indices.
  void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src);
  void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src);

  // ---- matrix multiply ----
  // out = a·b (+ bias), or with accumulate out += a·b (+ bias). a: [batch, M, K], b: [batch, K, N],
  // out: [batch, M, N] contiguous. a and b may be any strided views whose last two dims are row- or
  // column-major (transposes are passed to BLAS, not copied); a batch stride of 0 means broadcast.
  // bias: undefined, or a contiguous [N] added to every row of out: the epilogue of a linear layer.
  // residual: undefined, or a contiguous tensor shaped like out added to it (linear_add's skip
  // connection); out itself accumulates (out += a·b), any other must not share out's storage.
  // Both are added as the one value residual + bias, by the CPU's own kernel as it stores out, with
  // no pass of their own (cpu_matmul.cpp).
  void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual);
  // A linear layer's weight and bias gradients: dw = gᵀ·x and db = the column sums of g (when db
  // is defined). g [rows, out] and x [rows, in] contiguous, dw [out, in], db [out]. The default is
  // gemm then reduce; the CPU sums g inside the weight gradient's product where its own kernel
  // runs that product (cpu_matmul.cpp), saving the reduction's pass over g.
  void linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db);

  // ======== fused nn kernels: norms, losses, optimizer steps, attention, MHLA ========
  // The nn/ computations that would otherwise loop over raw tensor data or run as a chain of
  // primitives: each is one kernel here, so nn/ stays device-agnostic and a training step never
  // leaves the device.

  // ---- normalisation over the last dim (x contiguous, read as [rows, n]) ----
  // LayerNorm: out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (population
  // variance). weight and bias ([n], contiguous) may each be undefined (no affine part). mean and
  // rstd ([rows], x's dtype) are written for the backward.
  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                         const Tensor& mean, const Tensor& rstd);
  // Writes dx, and dweight / dbias (sums over rows) where they are defined. dx may be dy itself
  // (here and in rmsnorm_backward): autograd hands in a gradient nobody else holds as the output.
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
  // RMSNorm: out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps); weight may be undefined.
  void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out, const Tensor& rstd);
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        const Tensor& dx, const Tensor& dweight);

  // ---- losses ----
  // Cross-entropy with label smoothing eps over the rows of x [rows, C] (contiguous, float32 or
  // float64), targets [rows] int64 contiguous, each in [0, C) or ignore_index (the caller checks
  // the range). With m = max_c x_c and s = Σ_c exp(x_c - m), per row (t = target):
  //   lse[r]  = m + log s
  //   loss[r] = log s - (1 - eps)(x_t - m) - (eps / C) Σ_c (x_c - m)   (last term only if eps > 0)
  // Subtracting m first keeps it exact for huge logits. lse and loss are float64 [rows]; ignored
  // rows get 0 in both. total (0-d float64, or undefined when not wanted) = Σ_r loss[r], in a fixed
  // order per device (row order on the CPU).
  void cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index, double label_smoothing,
                             const Tensor& lse, const Tensor& loss, const Tensor& total);
  // dx[r, c] = w[r] * (exp(x_rc - lse[r]) - eps / C - (1 - eps) [c == t_r]), 0 on ignored rows.
  // weight is float64 [rows] with any stride (stride 0: one weight for every row); dx is a fresh
  // tensor of x's shape and dtype.
  void cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& weight,
                              int64_t ignore_index, double label_smoothing, const Tensor& dx);

  // ---- optimizer steps ----
  // One parameter of a fused AdamW step. All four tensors are contiguous, of one shape and one
  // floating dtype; param, exp_avg and exp_avg_sq are updated in place. The per-parameter
  // scalars (its group's lr and weight decay, its own step count t) come precomputed:
  struct AdamWParam {
    Tensor param, grad, exp_avg, exp_avg_sq;
    double decay;      // 1 - lr * weight_decay
    double step_size;  // lr / (1 - beta1^t)
    double sqrt_bc2;   // sqrt(1 - beta2^t)
  };
  // For every element of every parameter, in the parameter's dtype:
  //   p *= decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)
  // All parameters in one pass (on the GPU one launch per dtype: multi-tensor apply).
  void adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps);
  // One parameter of a fused SGD step (contiguous, one shape and dtype; param and
  // momentum_buffer updated in place). momentum_buffer is undefined without momentum.
  struct SgdParam {
    Tensor param, grad, momentum_buffer;
    double lr, weight_decay;
    bool first;  // the parameter's first step: the buffer starts as the gradient
  };
  //   d = g + wd p; with momentum: b = first ? d : momentum b + d, d = nesterov ? d + momentum b : b;
  //   p -= lr d        (all in the parameter's dtype)
  void sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov);
  // out[t] = Σ_i xs[t]_i² for each of the contiguous floating tensors xs, out a contiguous float64
  // [xs.size()]; the products and the sums in double (clip_grad_norm_'s squared norms of every
  // gradient in one call, without float64 copies of them). The order of each sum is fixed per
  // device, so a run is reproducible.
  void sum_squares(const std::vector<Tensor>& xs, const Tensor& out);
  // xs[t] *= factor in place for each of the contiguous floating tensors xs (all on one device),
  // with factor cast to each tensor's dtype first: the bits of a binary Mul by a scalar of that
  // dtype. clip_grad_norm_'s scaling of every gradient in one call (a call per gradient woke the
  // CPU's threads once per gradient).
  void scale_all(const std::vector<Tensor>& xs, double factor);

  // ---- fused attention ----
  // Exact softmax attention over B·H independent [N, ·] problems, in tiles with an online softmax
  // (FlashAttention-2): no N×N matrix is ever stored. q, k: [B, H, N, d]; v: [B, H, N, dv]; out,
  // dout and the gradients shaped like their partner; one floating dtype (float32 or float64).
  // These are rows: unit stride along the last dim, any other strides, so the heads of a
  // [B, N, H·e] (or packed [B, N, 3·H·e]) projection are read and written where they lie; outputs
  // are allocated by the caller and must not overlap. lse is contiguous [B·H, N]. With
  // S = scale · q kᵀ, masked to -inf above the diagonal (key j > query i) when causal:
  //   out = softmax(S) v          [B, H, N, dv]
  //   lse = logsumexp(S, rows)    [B·H, N]   (saved for the backward)
  // A backend may also keep the probabilities P = softmax(S) of short sequences, which are small,
  // so that the backward reads them instead of recomputing them: attention_probs_size says how
  // many values per (batch·head) pair for N keys in dtype (0: none, the default). Where it is
  // not 0, a caller that will call the backward passes probs, a contiguous [B·H, that size] of
  // q's dtype, for the forward to fill and the backward to read (its layout is the backend's);
  // elsewhere probs is undefined.
  virtual int64_t attention_probs_size(int64_t N, DType dtype) const { return 0; }
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                         const Tensor& out, const Tensor& lse, const Tensor& probs);
  // Gradients from dout = dL/dout, with P read from probs or recomputed as exp(S - lse) tile by tile:
  //   D = rowsum(dout ∘ out), dS = P ∘ (dout vᵀ - D),
  //   dq = scale · dS k,  dk = scale · dSᵀ q,  dv = Pᵀ dout.
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& probs, const Tensor& dout, double scale, bool causal, const Tensor& dq,
                          const Tensor& dk, const Tensor& dv);

  // ---- fused MHLA (nn/functional/mhla.cpp; docs/mhla.md, "Fused CUDA kernels") ----
  // Multi-head linear attention as the device's own kernels instead of a composition of GEMMs
  // and elementwise ops, both forms on every device (tensor/cpu/cpu_mhla.cpp: one (batch, head)
  // pair at a time in cache; cuda/mhla.cu).
  // Shapes (M = ceil(N / block_len) blocks, one floating dtype): q, k [B, H, N, d]; v [B, H, N, dv];
  // out [B, H, N, dv]; mix [M, M] contiguous. The per-token tensors (q, k, v, out, and grad, dq,
  // dk, dv below) need unit stride along the last dim only: the heads of a [B, N, H·e] projection
  // are read and written in place, with no head split or merge copies. BH = B·H pairs.
  // φ (feature_map) is applied by the kernels; the last block's padding is implicit. The
  // official_normalizer variant is not offered here (it stays on the GEMM path).
  struct MHLAArgs {
    bool causal = false;
    int64_t block_len = 0;
    FeatureMap feature_map = FeatureMap::ReluEps;
    double eps = 0;       // ReluEps offset and the non-causal normaliser's floor
    double scale = 1;     // causal only, already resolved (d^-1/2 by default)
    // Causal only: causal linear attention's normaliser (nn/functional/linear_attention.cpp). The
    // kernels run on V' = [V | 1] without it being stored, write o_t = U'_t[:dv] / r_t with
    // r_t = U'_t[dv] + eps, and the backward forms dU' = [G / r | −rowsum(G ∘ O) / r] from grad.
    bool normalised = false;
  };
  // The geometry of operands that passed the checks (fused_checks::mhla), as the kernels use it:
  // BH = B·H pairs of N tokens, head dims d and dv, M = ceil(N / L) blocks of L = block_len tokens.
  struct MHLADims {
    int64_t B, H, BH, N, d, dv, L, M;
    int64_t block() const { return d * (dv + 1); }                           // elements of one summary S'_j
    int64_t rows(int64_t j) const { return N - j * L < L ? N - j * L : L; }  // tokens of block j
    static MHLADims of(const Tensor& q, const Tensor& v, const MHLAArgs& a) {
      const int64_t N = q.size(2), L = a.block_len;
      return {q.size(0), q.size(1), q.size(0) * q.size(1), N, q.size(3), v.size(3), L, (N + L - 1) / L};
    }
  };
  // Whether the causal kernels take MHLAArgs::normalised (the CPU's; elsewhere linear attention
  // appends V's ones column and normalises around the kernels).
  virtual bool has_fused_causal_normaliser() const { return false; }
  // Writes out and what the backward reads (φ is recomputed there from q, k):
  //   non-causal: s = S'_j = φ(K_j)ᵀ[V_j | 1] and sh = Ŝ' = W S', both [BH, M, d, dv+1];
  //               r = the normaliser φ(q_t)·ẑ + eps, [BH, N]
  //   causal:     s = S_j = φ(K_j)ᵀV_j and sh = scale · Σ_{j<i} W_ij S_j, both [BH, M, d, dv];
  //               r is not used (pass an undefined tensor)
  //   normalised: as causal on V', so s and sh are [BH, M, d, dv+1], and r [BH, N] as non-causal
  void mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                            const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r);
  // From grad = dL/dout [B, H, N, dv] and the forward's tensors, writes dq, dk, dv (shaped like q,
  // k, v, any layout as above) and dmix (contiguous; it sums over all pairs, deterministically).
  void mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                             const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r,
                             const Tensor& grad, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& dmix);

 protected:
  explicit Backend(DeviceType type) : type_(type) {}

  // The kernels, called once each method's checks have passed (so a body may rely on them). A
  // device implements every one: LINEA_BACKEND_KERNELS(override) in its class declares them.
  LINEA_BACKEND_KERNELS(= 0)
  // Kernels with a default here (backend.cpp), composed from the kernels above.
  virtual void do_activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx);
  virtual void do_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db);

 private:
  DeviceType type_;
};

// The backend for a device; throws a linea::Error when there is none (CUDA in a CPU-only build or
// on a machine without a GPU).
Backend& backend(Device device);

namespace cpu {
Backend& instance();  // the CPU backend of the instruction set that runs (tensor/cpu_isa.h)
}

// A device's backend registers itself here (cuda/ does, from a static initializer in
// cuda/runtime.cpp), so tensor/ never names another device's code. `provider` is asked each time
// a tensor on that device type needs kernels; it answers nullptr when the device is absent.
using BackendProvider = Backend* (*)();
void register_backend(DeviceType type, BackendProvider provider);

}  // namespace linea
