#include "mhla_check.h"

#include <chrono>

#include "mhla_reference.h"
#include "linea/tensor/error.h"

namespace linea::check {

namespace {
namespace F = nn::functional;

struct Case {
  int64_t B, H, N, L, d, dv;
  F::FeatureMap fm;
  bool causal;
};
// Padded last blocks (N % L != 0), M = 1 (L >= N), d != dv, every feature map, both forms.
const Case kCases[] = {
    {2, 2, 13, 4, 3, 5, F::FeatureMap::ReluEps, false}, {1, 2, 7, 7, 4, 3, F::FeatureMap::Elu1, false},
    {1, 1, 9, 2, 2, 2, F::FeatureMap::Identity, false}, {2, 1, 10, 3, 2, 4, F::FeatureMap::Relu, false},
    {2, 2, 13, 4, 4, 5, F::FeatureMap::ReluEps, true},  {1, 2, 7, 8, 3, 4, F::FeatureMap::Elu1, true},
    {1, 2, 10, 3, 3, 2, F::FeatureMap::Identity, true}, {1, 1, 11, 4, 5, 3, F::FeatureMap::Relu, true},
};
// Float64 forms of one function: they differ only in summation order.
constexpr double kAtol = 1e-12, kRtol = 1e-10;

// Output and gradients (q, k, v, mix) of sum(out * g) of `form`, on the inputs' device.
using Form = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>;
std::vector<Tensor> run(const Form& form, const std::vector<Tensor>& in, const Tensor& g) {
  std::vector<Tensor> x;
  for (const Tensor& t : in) x.push_back(t.detach().requires_grad_());
  const Tensor out = form(x[0], x[1], x[2], x[3]);
  sum(out * g).backward();
  return {out.detach(), x[0].grad(), x[1].grad(), x[2].grad(), x[3].grad()};
}

const char* kParts[] = {"output", "grad of q", "grad of k", "grad of v", "grad of mix"};
}  // namespace

std::vector<Result> check_mhla(Device device) {
  std::vector<Result> results;
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    const std::string tag = fmt::format("mhla{} N={} L={} d={} dv={} {}", c.causal ? " causal" : "", c.N, c.L, c.d,
                                        c.dv, feature_map_name(c.fm));
    const F::MHLAOptions o{.causal = c.causal, .block_len = c.L, .feature_map = c.fm};
    // Inputs made on the CPU and moved; positive q, k under the identity map (a positive
    // normaliser), and a non-causal mix in [0.1, 1.1).
    Generator gen(seed += 10);
    std::vector<Tensor> in = {randn({c.B, c.H, c.N, c.d}, gen, DType::Float64),
                              randn({c.B, c.H, c.N, c.d}, gen, DType::Float64),
                              randn({c.B, c.H, c.N, c.dv}, gen, DType::Float64)};
    if (c.fm == F::FeatureMap::Identity) in[0] = abs(in[0]) + 0.1, in[1] = abs(in[1]) + 0.1;
    const int64_t M = (c.N + c.L - 1) / c.L;
    in.push_back(c.causal ? randn({M, M}, gen, DType::Float64) : rand({M, M}, gen, DType::Float64) + 0.1);
    for (Tensor& t : in) t = t.to(device);
    const Tensor g = randn({c.B, c.H, c.N, c.dv}, gen, DType::Float64).to(device);

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> ref;
    try {
      ref = run([&](auto q, auto k, auto v, auto m) { return mhla_quadratic(q, k, v, m, o); }, in, g);
    } catch (const Error& e) {
      Result r(tag + ": quadratic reference", device, "float64");
      r.status = Status::Error, r.message = e.what();
      results.push_back(r);
      continue;
    }
    const double ref_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    auto compare = [&](const std::string& name, const std::function<std::vector<Tensor>()> form) {
      Result r(tag + ": " + name, device, "float64");
      const auto t1 = std::chrono::steady_clock::now();
      try {
        const std::vector<Tensor> got = form();
        bool ok = true;
        for (size_t i = 0; i < got.size(); ++i) ok = fold_worst(r.worst, kParts[i], got[i], ref[i], kAtol, kRtol) && ok;
        if (!ok) r.status = Status::Fail, r.message = r.worst.what + " out of tolerance";
      } catch (const Error& e) {
        r.status = Status::Error, r.message = e.what();
      }
      r.seconds = ref_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      results.push_back(r);
    };
    compare("fused vs quadratic",
            [&] { return run([&](auto q, auto k, auto v, auto m) { return F::mhla(q, k, v, m, o); }, in, g); });
    compare("composite vs quadratic",
            [&] { return run([&](auto q, auto k, auto v, auto m) { return F::mhla_composite(q, k, v, m, o); }, in, g); });
    if (c.causal)  // the stream keeps no graph: its output only
      compare("streaming vs quadratic", [&] {
        F::MHLAStream stream(in[3], o);
        std::vector<Tensor> outs;
        for (int64_t t = 0; t < c.N; ++t) outs.push_back(stream.step(in[0].select(2, t), in[1].select(2, t), in[2].select(2, t)));
        return std::vector<Tensor>{stack(outs, 2)};
      });
  }
  return results;
}

}  // namespace linea::check
