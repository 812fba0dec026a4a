// Two numbers that tell attention maps apart (examples/attention_lab):
//   numerical rank: how many independent directions an N×N map has, from its singular values
//     (LAPACK's dgesdd, which OpenBLAS ships), counting those above rel_tol · σ_max;
//   entropy ratio: the mean over rows of H(row) / log(n_row), where a row is the weights one query
//     gives its keys and n_row the keys it may see. 1 is uniform (the query cannot single anything
//     out), 0 is one-hot.
#pragma once
#include <cstdint>
#include <vector>

#include <linea/linea.h>

namespace linea::data {

// The singular values of a 2-D matrix (any float dtype, CPU), largest first, computed in float64.
std::vector<double> singular_values(const Tensor& a);

// The number of singular values above rel_tol · σ_max (0 for an all-zero matrix).
int64_t numerical_rank(const Tensor& a, double rel_tol);
int64_t numerical_rank(const std::vector<double>& singular_values, double rel_tol);

// Mean over rows of H(p) / log(n), p = the row divided by its sum, H(p) = −Σ p log p. `causal`:
// row t sees only keys 0..t (n = t + 1; row 0, with one key, has no choice and is skipped), and
// entries above the diagonal must be 0. Non-causal rows have n = N. Rows that sum to 0 (a query
// that attends to nothing) have no distribution and are skipped too. Entries must be >= 0;
// throws a linea::Error otherwise, or when no row is left.
double entropy_ratio(const Tensor& a, bool causal = false);

}  // namespace linea::data
