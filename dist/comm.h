// What dist.cpp dispatches to: the MPI side (mpi.cpp, CPU tensors, built with LINEA_DIST) and the
// NCCL side (nccl.cpp, CUDA tensors, built with LINEA_DIST and CUDA). Internal to dist/.
#pragma once
#include "linea/dist/dist.h"

namespace linea::dist {

// An operation in flight; each side derives its own.
struct Work::Impl {
  virtual ~Impl() = default;
  virtual bool test() = 0;  // done?
  virtual void wait() = 0;
};

namespace detail {

// MPI: joins the job mpirun started and fills `w` (MPI_Init_thread, finalised at exit).
void mpi_join(World& w);
std::unique_ptr<Work::Impl> mpi_all_reduce(const Tensor& t, ReduceOp op);
void mpi_broadcast(const Tensor& t, int root);
void mpi_barrier();
void mpi_broadcast_bytes(void* data, int nbytes, int root);  // NCCL's bootstrap uses it

// NCCL: the communicator is made on first use, its unique id broadcast over MPI.
std::unique_ptr<Work::Impl> nccl_all_reduce(const Tensor& t, ReduceOp op);
void nccl_broadcast(const Tensor& t, int root);

}  // namespace detail
}  // namespace linea::dist
