// Random integers, permutations and derived seeds for the data pipeline. Our own Fisher-Yates
// instead of std::shuffle, whose output differs between standard libraries: the same seed must
// give the same batches on every machine, or a resumed run would not continue bit for bit.
#pragma once
#include <cstdint>
#include <vector>

#include <linea/tensor/random.h>

namespace linea::data {

// Uniform in [0, n) by Lemire's multiply-shift (bias below n / 2^64, far beneath any use here).
inline int64_t random_below(Generator& gen, int64_t n) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(gen.next_u64()) * static_cast<uint64_t>(n)) >> 64);
}

// Shuffles v in place (Fisher-Yates).
template <class T>
void shuffle(std::vector<T>& v, Generator& gen) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[random_below(gen, i + 1)]);
}

// A seed for stream (a, b) of `seed`, e.g. (epoch, batch): each stream gets its own generator,
// so what a batch sees depends on its position only, never on what ran before it.
inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  auto mix = [](uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) + a * 0x9e3779b97f4a7c15ULL + 1) + b * 0x9e3779b97f4a7c15ULL + 2);
}

}  // namespace linea::data
