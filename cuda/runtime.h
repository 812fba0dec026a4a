// Is there a GPU to run on? The one question the rest of linea asks the CUDA runtime directly.
// Both functions are safe to call in any build and on any machine: a CPU-only build (LINEA_CUDA
// off) or a machine without a driver or device answers false / 0 instead of throwing.
#pragma once

namespace linea::cuda {

bool is_available();  // at least one usable CUDA device
int device_count();   // number of usable CUDA devices, 0 when none

}  // namespace linea::cuda
