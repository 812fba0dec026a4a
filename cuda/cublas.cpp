// The process-wide cuBLAS handle (cublas.h).
#include "linea/cuda/cublas.h"

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/runtime.h"
#include "linea/tensor/error.h"

namespace linea::cuda {

namespace {

// cuBLAS's workspace: scratch its split-K and tensor-core kernels use. NVIDIA recommends 32 MiB on
// Hopper (4 MiB suffices before it). Given explicitly, cuBLAS never allocates behind our back.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

}  // namespace

cublasHandle_t cublas() {
  // Handle and workspace live as long as the process and are deliberately never destroyed: at
  // static-destruction time the CUDA context may already be gone, and freeing then would fail.
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    LINEA_CUBLAS_CHECK(cublasCreate(&h));
    LINEA_CUBLAS_CHECK(cublasSetStream(h, stream()));
    // After cublasSetStream: setting a stream resets the workspace to cuBLAS's default pool. The
    // first gemm may come after the caching allocator has filled the device with free blocks (a
    // large attention run, say): on out-of-memory, give those back and try once more.
    void* workspace = nullptr;
    cudaError_t err = cudaMalloc(&workspace, kWorkspaceBytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      empty_cache();
      err = cudaMalloc(&workspace, kWorkspaceBytes);
    }
    LINEA_CUDA_CHECK(err);
    LINEA_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, kWorkspaceBytes));
    return h;
  }();
  return handle;
}

void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line) {
  throw Error(fmt::format("[cublas] {} failed: {} ({}) at {}:{}", what, cublasGetStatusString(status),
                          static_cast<int>(status), file, line));
}

}  // namespace linea::cuda
