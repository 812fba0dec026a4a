// What the examples' trainers add to run under `mpirun -np N` (linea::dist): every rank trains on
// its shard of each global batch; rank 0 alone prints and writes files; running sums kept in
// checkpoints are sums over all ranks, so a run resumes on any number of processes.
#pragma once
#include <csignal>
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

// The stop request every rank acts on (data/progress.h: the signal, 0 for none): the ranks stop at
// the same step even when the signal reached only some of them, or reached them steps apart.
// SIGTERM wins over SIGINT, so a scheduler's stop gets its status. One tiny all-reduce per call.
inline int agreed_stop_signal(int local) {
  if (linea::dist::world().size == 1) return local;
  const std::vector<double> n = sum_over_ranks({local == SIGTERM ? 1.0 : 0.0, local != 0 ? 1.0 : 0.0});
  return n[0] > 0 ? SIGTERM : n[1] > 0 ? SIGINT : 0;
}

// A run that ends early (a stop, a divergence) returns through this on every rank: output
// flushed, and no rank past it before all are, so mpirun, which ends the job when the first rank
// exits with a non-zero status, cannot cut rank 0's checkpoint write or message short.
inline int leave_together(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  linea::dist::barrier();
  return status;
}

}  // namespace examples
