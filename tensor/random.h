// Seedable random numbers. A Generator is explicit state (xoshiro256**, seeded through
// splitmix64), so the same seed gives the same numbers on every run and every machine: normals
// use our own Box-Muller instead of std::normal_distribution, whose output is library-defined.
#pragma once
#include <cstdint>

namespace linea {

class Generator {
 public:
  // The whole state, so a checkpoint can store it and a resumed run draws the same numbers.
  struct State {
    uint64_t s[4];
    double spare;
    bool has_spare;
  };

  explicit Generator(uint64_t seed = 0x5eed) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t next_u64();
  double uniform();  // [0, 1), 53 random bits
  double normal();   // standard normal
  State state() const { return {{s_[0], s_[1], s_[2], s_[3]}, spare_, has_spare_}; }
  void set_state(const State& st) {
    for (int i = 0; i < 4; ++i) s_[i] = st.s[i];
    spare_ = st.spare;
    has_spare_ = st.has_spare;
  }

 private:
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

// The process-wide generator used when no generator is passed.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace linea
