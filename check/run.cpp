#include "run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "linea/tensor/error.h"

namespace linea::check {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs body, timing it and turning a linea::Error into Status::Error.
template <class Body>
Result timed(Result r, Body body) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    body(r);
  } catch (const Error& e) {
    r.status = Status::Error;
    r.message = e.what();
  }
  r.seconds = seconds_since(t0);
  return r;
}
}  // namespace

bool fold_worst(Worst& w, const std::string& what, const Tensor& got, const Tensor& want, double atol, double rtol) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    w = {what + fmt::format(": {} {} vs {} {}", shape_str(got.shape()), got.dtype(), shape_str(want.shape()),
                            want.dtype()), {}, 0, 0, INFINITY, INFINITY, INFINITY};
    return false;
  }
  const std::vector<double> g = got.to(Device::cpu()).to_vector(), r = want.to(Device::cpu()).to_vector();
  bool ok = true;
  for (size_t e = 0; e < g.size(); ++e) {
    const double err = std::abs(g[e] - r[e]);
    // Equal infinities (a masked -inf logit) match; NaN anywhere else is the worst possible.
    const double ratio = g[e] == r[e] ? 0 : std::isnan(err) ? INFINITY : err / (atol + rtol * std::abs(r[e]));
    ok = ok && ratio <= 1;
    if (w.what.empty() || ratio > w.ratio)
      w = {what, multi_index(static_cast<int64_t>(e), got.shape()), g[e], r[e], g[e] == r[e] ? 0 : err,
           g[e] == r[e] ? 0 : err / std::abs(r[e]), ratio};
  }
  return ok;
}

namespace {
// One registry case through `check` (gradcheck, or gradgradcheck for the second order).
using Checker = GradcheckResult (*)(const GradcheckFn&, const std::vector<Tensor>&, GradcheckOptions);

Result check_case(const OpCase& c, Device device, uint64_t seed, Checker check) {
  return timed(Result(c.name, device, "float64"), [&](Result& r) {
    LINEA_CHECK(c.differentiable, "[linea-check] {} has no gradient to check", c.name);
    const std::vector<Tensor> xs = make_inputs(c, DType::Float64, device, seed, true);
    const GradcheckResult g = check(c.f, xs, {.atol = c.gc_atol, .rtol = c.gc_rtol});
    const GradcheckWorst& w = g.worst;
    r.worst = {fmt::format("input {}", w.input), w.index, w.analytic, w.numeric, w.abs_error, w.rel_error, w.ratio};
    if (!g.ok) {
      r.status = Status::Fail;
      r.message = g.message;
    }
  });
}
}  // namespace

Result gradcheck_case(const OpCase& c, Device device, uint64_t seed) { return check_case(c, device, seed, gradcheck); }

Result gradgradcheck_case(const OpCase& c, Device device, uint64_t seed) {
  Result res = check_case(c, device, seed, gradgradcheck);
  if (res.status == Status::Error && res.message.find("not supported yet") != std::string::npos)
    res.status = Status::Skipped;
  return res;
}

namespace {
struct Run {
  Tensor y;
  std::vector<Tensor> grads;  // undefined where no gradient reached an input
};

Run run_on(const OpCase& c, DType dtype, Device device, uint64_t seed) {
  std::vector<Tensor> xs = make_inputs(c, dtype, device, seed, true);
  Run run{c.f(xs), {}};
  if (!c.differentiable) return run;
  Generator gen(seed + 1);  // the weighting u, made on the CPU so both devices use the same one
  const Tensor u = randn(run.y.shape(), gen, run.y.dtype()).to(device);
  sum(u * run.y).backward();
  for (const Tensor& x : xs) run.grads.push_back(x.grad());
  return run;
}
}  // namespace

Result compare_case(const OpCase& c, Device device, DType dtype, uint64_t seed) {
  return timed(Result(c.name, device, fmt::format("{}", dtype)), [&](Result& r) {
    const Run cpu = run_on(c, dtype, Device::cpu(), seed), dev = run_on(c, dtype, device, seed);
    LINEA_CHECK(dev.y.device() == device, "[linea-check] {}: the output is on {}, not {}", c.name, dev.y.device(),
                device);
    bool ok = fold_worst(r.worst, "output", dev.y, cpu.y, compare_atol(c.tol, dtype), compare_rtol(c.tol, dtype));
    // Gradients pass through a backward (often a reduction): they get the reduction tolerance.
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      const std::string what = fmt::format("grad of input {}", i);
      if (cpu.grads[i].defined() != dev.grads[i].defined()) {
        r.message = fmt::format("{}: defined on {} only", what, cpu.grads[i].defined() ? "cpu" : device.str());
        ok = false;
      } else if (cpu.grads[i].defined()) {
        ok = fold_worst(r.worst, what, dev.grads[i], cpu.grads[i], compare_atol(Tol::Reduction, dtype),
                        compare_rtol(Tol::Reduction, dtype)) && ok;
      }
    }
    if (!ok) {
      r.status = Status::Fail;
      if (r.message.empty()) r.message = fmt::format("{} out of tolerance", r.worst.what);
    }
  });
}

Result nan_case(const OpCase& c, Device device, DType dtype, uint64_t seed) {
  return timed(Result(c.name, device, fmt::format("{}", dtype)), [&](Result& r) {
    auto run = [&](const Poke* poke) {
      return c.f(make_inputs(c, dtype, device, seed, false, poke)).to(Device::cpu()).to_vector();
    };
    const std::vector<Tensor> xs = make_inputs(c, dtype, device, seed, false);
    const Tensor y = c.f(xs);
    if (!is_floating(y.dtype())) return;
    const std::vector<double> y0 = y.to(Device::cpu()).to_vector();
    int64_t affected = 0, nans = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!is_floating(xs[i].dtype()) ||
          std::find(c.nan_stops.begin(), c.nan_stops.end(), i) != c.nan_stops.end())
        continue;
      const int64_t n = xs[i].numel();
      const std::vector<double> x = xs[i].to(Device::cpu()).to_vector();
      for (int64_t e : std::set<int64_t>{0, n / 2, n - 1}) {
        std::vector<bool> moved(y0.size(), false);
        for (double delta : {10.0, -10.0}) {
          const Poke p{i, e, x[e] + delta};
          const std::vector<double> yp = run(&p);
          for (size_t o = 0; o < y0.size(); ++o) moved[o] = moved[o] || (yp[o] != y0[o] && !std::isnan(y0[o]));
        }
        const Poke p{i, e, NAN};
        const std::vector<double> yn = run(&p);
        for (size_t o = 0; o < y0.size(); ++o) {
          if (!moved[o]) continue;
          ++affected;
          if (std::isnan(yn[o])) {
            ++nans;
          } else if (r.status == Status::Pass) {
            const std::vector<int64_t> at = multi_index(e, xs[i].shape());
            r.status = Status::Fail;
            r.worst = {"output", multi_index(static_cast<int64_t>(o), y.shape()), yn[o], NAN, INFINITY, INFINITY,
                       INFINITY};
            r.message = fmt::format("a NaN in input {} at [{}] leaves output [{}] = {}, which depends on it", i,
                                    fmt::join(at, ", "), fmt::join(r.worst.index, ", "), yn[o]);
          }
        }
      }
    }
    if (r.status == Status::Pass) r.worst = {"affected outputs", {}, double(nans), double(affected), 0, 0, 0};
  });
}

}  // namespace linea::check
