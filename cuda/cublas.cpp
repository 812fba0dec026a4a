// The process-wide cuBLAS handle (cublas.h).
#include "linea/cuda/cublas.h"

#include "linea/cuda/cuda_backend.h"

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
    // After cublasSetStream: setting a stream resets the workspace to cuBLAS's default pool.
    void* workspace = nullptr;
    LINEA_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
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
