// The counter-based random numbers behind Backend::random_uniform (dropout masks): number i of a
// stream is a pure function of (seed, counter), so any element can be computed on its own, by any
// thread, on any device, and a stream can be resumed from a counter without replaying it.
//
// The function is splitmix64 (Steele, Lea, Flood 2014): its output number c+1 from the state
// key = mix(seed) is mix(key + (c + 1) * gamma), with gamma = 2^64 / golden ratio (odd) and mix its
// finaliser (two xor-shift-multiply rounds, every output bit depends on every input bit). Hashing
// the seed first makes nearby seeds give unrelated streams.
//
// Plain integer math with no includes but <cstdint> on purpose: cuda/fused.cu compiles this very
// header, so the CPU and the GPU give bit-identical numbers for the same (seed, counter). It is
// the only tensor/ header a .cu file includes; keep it free of anything nvcc cannot compile.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define LINEA_HOST_DEVICE __host__ __device__
#else
#define LINEA_HOST_DEVICE
#endif

namespace linea::rng {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

LINEA_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The stream key of a seed (computed once per call, not per element).
LINEA_HOST_DEVICE inline uint64_t stream_key(uint64_t seed) { return mix64(seed); }

// 64 random bits for `counter` of the stream `key`.
LINEA_HOST_DEVICE inline uint64_t bits(uint64_t key, uint64_t counter) { return mix64(key + (counter + 1) * kGamma); }

// Uniform in [0, 1) from the top bits: 24 for float, 53 for double, so every value is exactly
// representable and 1.0 is never produced.
LINEA_HOST_DEVICE inline float unit_float(uint64_t b) { return static_cast<float>(b >> 40) * 0x1p-24f; }
LINEA_HOST_DEVICE inline double unit_double(uint64_t b) { return static_cast<double>(b >> 11) * 0x1p-53; }

}  // namespace linea::rng

#undef LINEA_HOST_DEVICE
