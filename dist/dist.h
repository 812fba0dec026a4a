// linea::dist: the processes of a data-parallel job and the collectives between them.
//
// A job is started by `mpirun -np N prog ...`; every process calls dist::init(), which reads its
// rank, the world size and its rank on this machine (local rank) from what mpirun put in the
// environment and joins MPI. A program started without mpirun is a world of one: init() then
// touches no MPI and every collective returns at once, so single-process code pays nothing.
//
// CPU tensors go through MPI (Debian's OpenMPI), CUDA tensors through NCCL, whose communicator is
// bootstrapped over MPI on the first CUDA collective. Every rank must call the same collectives in
// the same order with tensors of the same shape and dtype (as with MPI itself). A rank that
// waits longer than $LINEA_DIST_TIMEOUT seconds (default 300) in a collective — another rank died
// or hangs — prints which collective and rank timed out and aborts the whole job (MPI_Abort), so
// nobody waits forever. (A rank that exits or crashes makes mpirun end the others at once.)
#pragma once
#include <memory>

#include "linea/tensor/tensor.h"

namespace linea::dist {

struct World {
  int rank = 0;        // 0 .. size-1; rank 0 prints and writes files
  int size = 1;        // processes in the job
  int local_rank = 0;  // rank among the processes on this machine (picks the GPU)
};

// Joins the job (idempotent). Throws when mpirun started several processes but this build has no
// MPI (LINEA_DIST off), rather than run N unaware copies. In a CUDA build with a GPU it selects
// device local_rank % device_count, so each process on a machine uses its own GPU.
const World& init();
const World& world();  // init()'s answer (a world of one before init)
inline bool is_main() { return world().rank == 0; }
bool built_with_mpi();   // LINEA_DIST: MPI was found at build time
// How long a rank waits in a collective before it aborts the job: $LINEA_DIST_TIMEOUT seconds,
// a number from 0.1 to 1e6 (default 300). Anything else throws, naming the variable and its value;
// init() reads it first, so a bad value fails at startup.
double timeout_seconds();
bool built_with_nccl();  // and CUDA was on, so CUDA tensors reduce through NCCL

enum class ReduceOp { Sum, Mean };

// In place on a contiguous tensor, on every rank. Sum of bool is logical or, of uint8 wraps
// around; Mean is for floating tensors only (sum, then divided by the world size).
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
// Overwrites t on every rank with rank `root`'s t (any dtype, contiguous).
void broadcast(const Tensor& t, int root = 0);
void barrier();
// True on every rank when `flag` is true on any (e.g. "stop": Ctrl-C reached one process).
bool any(bool flag);

// This rank's contiguous part of n items (the rows of a global batch, a test set): rank r gets
// [n·r/size, n·(r+1)/size), so the parts are in rank order and differ in size by at most one.
struct Shard {
  int64_t begin = 0, size = 0;
};
Shard shard(int64_t n);

// An all_reduce in flight (from all_reduce_async): the tensor must be left alone until wait()
// returns. test() lets MPI progress it (OpenMPI moves non-blocking collectives along only inside
// MPI calls) and says whether it is done. Destroying a Work that was not waited for waits.
class Work {
 public:
  struct Impl;
  Work();
  explicit Work(std::unique_ptr<Impl> impl);
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  ~Work();
  bool test();
  void wait();
  bool pending() const { return impl_ != nullptr; }

 private:
  std::unique_ptr<Impl> impl_;
};
Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);

}  // namespace linea::dist
