// `linea-check mhla`: MHLA's fused form (hand-written backward), its composite form (autograd)
// and, when causal, its streaming form (one token at a time) against the brute-force quadratic
// reference (check/mhla_reference.h), outputs and all four gradients, in float64 on one device,
// over N not divisible by the block length, M = 1 and d != dv.
#pragma once
#include <vector>

#include "run.h"

namespace linea::check {

std::vector<Result> check_mhla(Device device);

}  // namespace linea::check
