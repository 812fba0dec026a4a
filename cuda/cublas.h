// The one cuBLAS handle of the process and cuBLAS's errors as linea::Errors. Host-only (g++):
// gemm (cuda_matmul.cpp) and any other family that multiplies matrices through cuBLAS share it.
#pragma once
#include <cublas_v2.h>

namespace linea::cuda {

// Created on first use, bound to stream() (cuda_backend.h) so cuBLAS work is ordered with every
// other kernel and copy, and given its own workspace (see cublas.cpp).
cublasHandle_t cublas();

// Turns a failed cuBLAS status into a linea::Error naming the call: LINEA_CUBLAS_CHECK(cublasX(...)).
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line);

}  // namespace linea::cuda

#define LINEA_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                    \
    cublasStatus_t linea_cublas_status_ = (call);                                                         \
    if (linea_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ::linea::cuda::throw_cublas_error(linea_cublas_status_, #call, __FILE__, __LINE__);                 \
  } while (0)
