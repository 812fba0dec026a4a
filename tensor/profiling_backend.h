// The timing wrapper around a device's backend that backend(device) returns while
// linea::Profiler records (profiler.h, profiling_backend.cpp).
#pragma once
#include "linea/tensor/backend.h"

namespace linea {

// A backend that passes every call on to `inner` and records its time and cost with the
// profiler. The same wrapper is returned for every call with the same device type.
Backend& profiling_backend(Backend& inner, Device device);

}  // namespace linea
