// What the examples' trainers add to run under `mpirun -np N` (linea::dist): every rank trains on
// its shard of each global batch; rank 0 alone prints and writes files; running sums kept in
// checkpoints are sums over all ranks, so a run resumes on any number of processes.
#pragma once
#include <cstdio>
#include <vector>

#include <linea/dist/dist.h>
#include <linea/linea.h>

namespace examples {

// Joins the job (a world of one without mpirun). The other ranks' stdout goes to /dev/null, so
// progress and results print once; their errors (stderr) still show.
inline const linea::dist::World& join_job() {
  const linea::dist::World& w = linea::dist::init();
  if (w.rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
  return w;
}

// Each value summed over the ranks (in float64), the same on every rank.
inline std::vector<double> sum_over_ranks(const std::vector<double>& values) {
  linea::Tensor t = linea::from_vector(values, {static_cast<int64_t>(values.size())});
  linea::dist::all_reduce(t);
  return t.to_vector();
}

}  // namespace examples
