// dist's front: the world, argument checks, and the dispatch of each collective to MPI (CPU
// tensors) or NCCL (CUDA tensors). A world of one returns before any of that.
#include <cstdlib>
#include <string>

#include "linea/cuda/runtime.h"
#include "linea/dist/comm.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/env.h"
#include "linea/tensor/error.h"

#if LINEA_DIST_NCCL
#include <cuda_runtime.h>
#endif

namespace linea::dist {

namespace {

World g_world;
bool g_joined = false;

// The world size mpirun (Open MPI) or a PMI launcher (MPICH's hydra, Slurm) announced, 1 if none.
int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (std::getenv(var) != nullptr) return static_cast<int>(env_integer(var, 1, 1, 1 << 20, "processes"));
  return 1;
}

void check_tensor(const Tensor& t, const char* op) {
  LINEA_CHECK(t.defined(), "[dist::{}] got an undefined tensor", op);
  LINEA_CHECK(t.is_contiguous(), "[dist::{}] needs a contiguous tensor, got shape {} with strides {}", op,
              shape_str(t.shape()), shape_str(t.strides()));
  if (t.device().is_cuda())
    LINEA_CHECK(built_with_nccl(), "[dist::{}] a {} tensor needs NCCL, and this build has none (LINEA_DIST with CUDA)",
                op, t.device());
}

}  // namespace

bool built_with_mpi() { return LINEA_DIST_MPI; }
bool built_with_nccl() { return LINEA_DIST_NCCL; }

double timeout_seconds() { return env_number("LINEA_DIST_TIMEOUT", 300, 0.1, 1e6, "seconds"); }

const World& init() {
  if (g_joined) return g_world;
  const int announced = launcher_world_size();
  timeout_seconds();  // a bad LINEA_DIST_TIMEOUT fails here, not at the first collective
  if (announced > 1 || (announced == 1 && std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)) {
#if LINEA_DIST_MPI
    detail::mpi_join(g_world);
#else
    LINEA_CHECK(false, "[dist::init] the launcher started {} processes, but this build of linea has no MPI "
                "(LINEA_DIST is off: install libopenmpi-dev and reconfigure); each would train alone",
                announced);
#endif
  }
#if LINEA_DIST_NCCL
  // One GPU per process on a machine; linea's CUDA backend uses the current device.
  if (const int n = cuda::device_count(); n > 0) cudaSetDevice(g_world.local_rank % n);
#endif
  g_joined = true;
  return g_world;
}

const World& world() { return g_world; }

Shard shard(int64_t n) {
  const int64_t begin = n * g_world.rank / g_world.size, end = n * (g_world.rank + 1) / g_world.size;
  return {begin, end - begin};
}

Work::Work() = default;
Work::Work(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->wait();
    impl_ = std::move(o.impl_);
  }
  return *this;
}
Work::~Work() {
  if (impl_) impl_->wait();
}
bool Work::test() { return !impl_ || impl_->test(); }
void Work::wait() {
  if (impl_) impl_->wait();
  impl_.reset();
}

Work all_reduce_async(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  LINEA_CHECK(op == ReduceOp::Sum || is_floating(t.dtype()),
              "[dist::all_reduce] mean needs a floating tensor, got {} of shape {} (use Sum)", t.dtype(),
              shape_str(t.shape()));
  if (g_world.size == 1 || t.numel() == 0) return Work();
#if LINEA_DIST_NCCL
  if (t.device().is_cuda()) return Work(detail::nccl_all_reduce(t, op));
#endif
#if LINEA_DIST_MPI
  return Work(detail::mpi_all_reduce(t, op));
#else
  return Work();  // unreachable: without MPI the world is one process
#endif
}

void all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op).wait(); }

void broadcast(const Tensor& t, int root) {
  check_tensor(t, "broadcast");
  LINEA_CHECK(root >= 0 && root < g_world.size, "[dist::broadcast] root {} is not a rank of this world of {}", root,
              g_world.size);
  if (g_world.size == 1 || t.numel() == 0) return;
#if LINEA_DIST_NCCL
  if (t.device().is_cuda()) return detail::nccl_broadcast(t, root);
#endif
#if LINEA_DIST_MPI
  detail::mpi_broadcast(t, root);
#endif
}

void barrier() {
#if LINEA_DIST_MPI
  if (g_world.size > 1) detail::mpi_barrier();
#endif
}

bool any(bool flag) {
  if (g_world.size == 1) return flag;
  Tensor t = full({1}, flag ? 1.0 : 0.0, {DType::Bool});
  all_reduce(t);
  return t.item() != 0;
}

}  // namespace linea::dist
