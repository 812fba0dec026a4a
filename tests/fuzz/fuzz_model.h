// The small model + optimizer whose checkpoint seeds fuzz_safetensors (make_seeds writes it, the
// harness loads fuzzed files into it).
#pragma once
#include <linea/linea.h>

namespace linea::fuzz {

struct CheckpointModel {
  nn::Linear net{3, 2};
  nn::AdamW optimizer{net.named_parameters()};
};

}  // namespace linea::fuzz
