// Opens one instruction set's copy of the CPU kernels (tensor/cpu_isa.h). The kernel sources
// (KERNEL_SOURCES in CMakeLists.txt) are compiled once per ISA, with LINEA_ISA_AVX512,
// LINEA_ISA_AVX2 or neither defined. Each includes this header after its other includes, puts its
// code and the kernel headers' in namespace linea::cpu::inline LINEA_ISA_NS (avx512, avx2,
// generic), and ends with isa_end.h. Between the two, every function is compiled for that ISA.
//
// Why not -mavx512f on the whole file: an inline function from a shared header (std::vector's,
// Tensor's) that the compiler does not inline is emitted in every file that uses it, and the
// linker keeps one copy for all of them; an AVX-512 copy kept for AVX2 callers dies with SIGILL
// on an AVX2 CPU. Everything included before this header is compiled for the baseline, so its
// copies are the same in every file. The ISA copies of code written after it have their own names
// (the namespace), so none can stand in for another. The pragma names features, not an -march:
// GCC then still inlines the baseline helpers into the kernels.
#pragma once
#ifdef LINEA_ISA_NS
#error "isa_begin.h opens one ISA per file"
#endif

// Headers the kernel headers use, included here so they are compiled for the baseline.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "linea/tensor/backend.h"
#include "linea/tensor/shape.h"

// The pragma's argument must be a literal string, hence the two branches per ISA.
#if defined(LINEA_ISA_AVX512)
#define LINEA_ISA_NS avx512
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt,sse4.2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt,sse4.2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")
#endif
#elif defined(LINEA_ISA_AVX2)
#define LINEA_ISA_NS avx2
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt,sse4.2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt,sse4.2")
#endif
#else
#define LINEA_ISA_NS generic
#endif
