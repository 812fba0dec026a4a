// FetchAhead: the lines a kernel's next task will touch (the next attention pair's, the next MHLA
// batch's), fetched a few at a time from inside the current task's loops.
//
// Why: in a training step these operands are out of cache (written by the layer's projection a
// few megabytes ago, or saved by the forward), and a task's first touch of each line waits on
// memory; the hardware prefetchers do not follow a task's rows (strided, or several streams
// at once) far enough ahead. Spread over the previous task's loops, a task's worth of fetches
// overlaps compute instead of stalling it. Lines read are fetched into L2; lines written are
// fetched for writing (a first store to a line out of cache waits for it to be read in). A burst
// of all of them at the start of a task did not pay: it stalls on the miss buffers.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <omp.h>

#include <cstdint>

#include "linea/tensor/cpu/head_rows.h"

namespace linea::cpu::inline LINEA_ISA_NS {

class FetchAhead {
 public:
  enum Access { Read, Write };
  // `steps`: about how many times the task's loops will call step(); each call fetches a share.
  explicit FetchAhead(int64_t steps = 1) : steps_(steps > 0 ? steps : 1) {}

  // rows lines of row_bytes each, ld_bytes apart (one contiguous run: rows = 1).
  void add(const void* p, int64_t rows, int64_t row_bytes, int64_t ld_bytes, Access a) {
    if (n_ == kMaxRuns || rows <= 0 || row_bytes <= 0) return;
    runs_[n_++] = {static_cast<const char*>(p), rows, (row_bytes + 63) / 64, ld_bytes, a == Write};
    total_ += rows * runs_[n_ - 1].lines;
    per_step_ = (total_ + steps_ - 1) / steps_;
  }
  void add(const void* p, int64_t bytes, Access a) { add(p, 1, bytes, 0, a); }

  void step() {
    for (int64_t k = 0; k < per_step_ && cur_ < n_; ++k) {
      const Run& r = runs_[cur_];
      const char* line = r.p + row_ * r.ld + 64 * col_;
      if (r.write) __builtin_prefetch(line, 1, 3);
      else __builtin_prefetch(line, 0, 2);
      if (++col_ == r.lines) {  // counters, not a division per line
        col_ = 0;
        if (++row_ == r.rows) row_ = 0, ++cur_;
      }
    }
  }

 private:
  static constexpr int kMaxRuns = 8;
  struct Run {
    const char* p;
    int64_t rows, lines, ld;
    bool write;
  };
  Run runs_[kMaxRuns]{};
  int n_ = 0, cur_ = 0;
  int64_t row_ = 0, col_ = 0, total_ = 0, per_step_ = 0, steps_;
};

// Rows [0, N) of pairs bh .. bh+n-1 of x (n heads of one batch side by side), for `ahead`.
template <class T>
void fetch_rows(FetchAhead& ahead, const Rows<T>& x, int64_t bh, int64_t n, int64_t N, FetchAhead::Access a) {
  ahead.add(x.pair(bh), N, ((n - 1) * x.sh + x.e) * int64_t(sizeof(T)), x.ld * int64_t(sizeof(T)), a);
}

// This thread's share of n tasks, contiguous as a static schedule's: a task then knows whether its
// successor is its own, and another thread's lines are never fetched from under it.
struct TaskRange {
  int64_t begin, end;
};
inline TaskRange my_tasks(int64_t n) {
  const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
  return {n * t / nt, n * (t + 1) / nt};
}

}  // namespace linea::cpu::inline LINEA_ISA_NS
