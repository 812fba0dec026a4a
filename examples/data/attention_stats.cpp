// Numerical rank (LAPACK SVD) and row entropy of attention maps (data/attention_stats.h).
#include "data/attention_stats.h"

#include <algorithm>
#include <cmath>

// LAPACK's divide-and-conquer SVD (Fortran calling convention; OpenBLAS exports it).
extern "C" void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
                        const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork,
                        int* info);

namespace linea::data {

namespace {

void check_matrix(const char* op, const Tensor& a) {
  LINEA_CHECK(a.dim() == 2 && is_floating(a.dtype()) && a.device().is_cpu(),
              "[{}] expected a 2-D float matrix on the CPU, got {} {} on {}", op, shape_str(a.shape()), a.dtype(),
              a.device());
}

}  // namespace

std::vector<double> singular_values(const Tensor& a) {
  check_matrix("singular_values", a);
  const int m = int(a.size(0)), n = int(a.size(1)), k = std::min(m, n);
  if (k == 0) return {};
  // Row-major a is column-major aᵀ, which has the same singular values.
  std::vector<double> x = a.to_vector();
  std::vector<double> s(static_cast<size_t>(k));
  std::vector<int> iwork(size_t(8 * k));
  const char jobz = 'N';  // values only
  const int one = 1;
  int lwork = -1, info = 0;
  double query = 0;
  dgesdd_(&jobz, &n, &m, x.data(), &n, s.data(), nullptr, &one, nullptr, &one, &query, &lwork, iwork.data(), &info);
  lwork = int(query);
  std::vector<double> work(size_t(std::max(lwork, 1)));
  dgesdd_(&jobz, &n, &m, x.data(), &n, s.data(), nullptr, &one, nullptr, &one, work.data(), &lwork, iwork.data(), &info);
  LINEA_CHECK(info == 0, "[singular_values] LAPACK dgesdd failed on a {} matrix (info {}{})", shape_str(a.shape()),
              info, info > 0 ? ": did not converge" : ": bad argument, or a NaN/inf entry");
  return s;  // dgesdd returns them in descending order
}

int64_t numerical_rank(const std::vector<double>& sv, double rel_tol) {
  LINEA_CHECK(rel_tol >= 0 && rel_tol < 1, "[numerical_rank] rel_tol must be in [0, 1), got {}", rel_tol);
  if (sv.empty() || sv[0] == 0) return 0;
  return std::count_if(sv.begin(), sv.end(), [&](double s) { return s > rel_tol * sv[0]; });
}

int64_t numerical_rank(const Tensor& a, double rel_tol) { return numerical_rank(singular_values(a), rel_tol); }

double entropy_ratio(const Tensor& a, bool causal) {
  check_matrix("entropy_ratio", a);
  const int64_t rows = a.size(0), cols = a.size(1);
  LINEA_CHECK(!causal || rows == cols, "[entropy_ratio] a causal map must be square, got {}", shape_str(a.shape()));
  const std::vector<double> v = a.to_vector();
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &v[size_t(r * cols)];
    const int64_t n = causal ? r + 1 : cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      LINEA_CHECK(row[c] >= 0, "[entropy_ratio] entry ({}, {}) of the {} map is {}: weights must be >= 0", r, c,
                  shape_str(a.shape()), row[c]);
      LINEA_CHECK(c < n || row[c] == 0, "[entropy_ratio] causal map has {} at ({}, {}), above the diagonal", row[c],
                  r, c);
      sum += row[c];
    }
    if (n < 2 || sum == 0) continue;
    double h = 0;
    for (int64_t c = 0; c < n; ++c)
      if (row[c] > 0) h -= row[c] / sum * std::log(row[c] / sum);
    total += h / std::log(double(n));
    ++counted;
  }
  LINEA_CHECK(counted > 0, "[entropy_ratio] the {} map has no row with two or more keys and a nonzero sum",
              shape_str(a.shape()));
  return total / double(counted);
}

}  // namespace linea::data
