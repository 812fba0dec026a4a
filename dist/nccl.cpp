// dist's NCCL side: all_reduce and broadcast on CUDA tensors. NCCL queues its kernels on
// linea's one CUDA stream, so they run in order with the kernels that made the gradients and
// with those that read them next: nothing on the host needs to wait for them.
#include <cuda_runtime.h>
#include <nccl.h>

#include "linea/cuda/cuda_backend.h"
#include "linea/dist/comm.h"
#include "linea/tensor/error.h"

namespace linea::dist::detail {

namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  LINEA_CHECK(rc == ncclSuccess, "[dist] {} failed on rank {}: {}", what, world().rank, ncclGetErrorString(rc));
}

// One communicator over the whole world, made on the first CUDA collective: rank 0's unique id
// reaches the others over MPI.
ncclComm_t comm() {
  static ncclComm_t c = [] {
    ncclUniqueId id;
    if (world().rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    mpi_broadcast_bytes(&id, sizeof(id), 0);
    ncclComm_t made = nullptr;
    check_nccl(ncclCommInitRank(&made, world().size, id, world().rank), "ncclCommInitRank");
    return made;
  }();
  return c;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return ncclUint8;  // bool is one byte: 0 or 1
    case DType::UInt8: return ncclUint8;
  }
  return ncclUint8;
}

// Queued on the stream: done as far as the host is concerned.
struct NcclWork : Work::Impl {
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<Work::Impl> nccl_all_reduce(const Tensor& t, ReduceOp op) {
  // Sum of bools is "any": max over 0/1 bytes.
  const ncclRedOp_t nop = t.dtype() == DType::Bool ? ncclMax : op == ReduceOp::Mean ? ncclAvg : ncclSum;
  check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nop, comm(),
                           cuda::stream()),
             "ncclAllReduce");
  return std::make_unique<NcclWork>();
}

void nccl_broadcast(const Tensor& t, int root) {
  check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), root,
                           comm(), cuda::stream()),
             "ncclBroadcast");
}

}  // namespace linea::dist::detail
