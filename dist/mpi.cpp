// dist's MPI side: joining the job, and all_reduce / broadcast / barrier on CPU tensors.
//
// Every wait polls (MPI_Test, then short sleeps) instead of blocking in MPI_Wait: a rank that
// waits does not spin a core away from the rank it waits for (these runs share a few cores), and
// the poll can give up after $LINEA_DIST_TIMEOUT seconds with a message naming what hung.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "linea/dist/comm.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::dist::detail {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  LINEA_CHECK(false, "[dist] {} failed on rank {}: {}", what, world().rank, std::string(msg, len));
}

// Polls until `req` completes; after timeout_seconds() it reports and aborts the job: the other ranks
// are most likely blocked in the same collective and would otherwise wait forever.
void wait_for(MPI_Request& req, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const double limit = timeout_seconds();
  auto nap = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > limit) {
      std::fprintf(stderr,
                   "[dist] rank %d of %d: %s waited %.0f s for the other ranks (LINEA_DIST_TIMEOUT=%g): a rank died or "
                   "hangs; aborting the job\n",
                   world().rank, world().size, what, waited, limit);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    // Spin briefly (a reduction on one machine takes microseconds), then back off to 1 ms.
    if (nap.count() > 0) std::this_thread::sleep_for(nap);
    nap = std::min(std::chrono::microseconds(1000), nap + std::chrono::microseconds(20));
  }
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

int mpi_count(const Tensor& t, const char* op) {
  LINEA_CHECK(t.numel() <= INT32_MAX, "[dist::{}] {} elements are more than one MPI call takes (2^31 - 1)", op,
              t.numel());
  return static_cast<int>(t.numel());
}

struct MpiWork : Work::Impl {
  MPI_Request req = MPI_REQUEST_NULL;
  Tensor t;
  ReduceOp op;
  bool done = false;

  bool test() override {
    if (done) return true;
    int flag = 0;
    check_mpi(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "all_reduce");
    if (flag) finish();
    return done;
  }
  void wait() override {
    if (done) return;
    wait_for(req, "all_reduce");
    finish();
  }
  void finish() {
    done = true;
    if (op == ReduceOp::Mean) {  // MPI has no mean: the sum, divided here
      Tensor n = scalar(static_cast<double>(world().size), {t.dtype()}).view({1}).expand({t.numel()});
      const Tensor flat = t.view({t.numel()});
      backend(t.device()).binary(BinaryOp::Div, flat, n, flat);
    }
  }
};

}  // namespace

void mpi_join(World& w) {
  int provided = 0;
  // FUNNELED: only the main thread calls MPI (the data loader's worker never does).
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back as linea::Error
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
  // The local rank: this process's rank among those sharing its memory (its machine).
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(node, &w.local_rank), "MPI_Comm_rank");
  MPI_Comm_free(&node);
}

std::unique_ptr<Work::Impl> mpi_all_reduce(const Tensor& t, ReduceOp op) {
  auto w = std::make_unique<MpiWork>();
  w->t = t;
  w->op = op;
  // Sum of bools is "any" (MPI defines only logical ops on MPI_C_BOOL).
  const MPI_Op mop = t.dtype() == DType::Bool ? MPI_LOR : MPI_SUM;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), mpi_count(t, "all_reduce"), mpi_type(t.dtype()), mop,
                           MPI_COMM_WORLD, &w->req),
            "MPI_Iallreduce");
  return w;
}

void mpi_broadcast(const Tensor& t, int root) {
  MPI_Request req;
  check_mpi(MPI_Ibcast(t.data_ptr(), mpi_count(t, "broadcast"), mpi_type(t.dtype()), root, MPI_COMM_WORLD, &req),
            "MPI_Ibcast");
  wait_for(req, "broadcast");
}

void mpi_broadcast_bytes(void* data, int nbytes, int root) {
  MPI_Request req;
  check_mpi(MPI_Ibcast(data, nbytes, MPI_BYTE, root, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  wait_for(req, "broadcast");
}

void mpi_barrier() {
  MPI_Request req;
  check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  wait_for(req, "barrier");
}

}  // namespace linea::dist::detail
