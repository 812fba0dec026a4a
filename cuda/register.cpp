// The CUDA backend registers itself with tensor/backend.cpp as the program starts, so tensor/
// never names cuda/. The provider answers only once the runtime has found a device: in a CUDA
// build on a machine without a GPU, backend(Device::cuda()) then throws the same "no backend"
// error as a CPU-only build (whose runtime_stub.cpp registers nothing).
//
// Nothing calls into this file by name, and a linker drops such an object file from a static
// library; the library's link options (-Wl,-u,linea_cuda_registered, CMakeLists.txt) keep it in
// every program. register_backend's table is a function-local static, so it exists whichever
// file's static initializers run first; only a CUDA tensor made by another static initializer,
// before this one has run, would find no backend yet.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/runtime.h"

namespace {

linea::Backend* cuda_backend_if_available() {
  return linea::cuda::is_available() ? &linea::cuda::instance() : nullptr;
}

}  // namespace

extern "C" {
extern const bool linea_cuda_registered;
const bool linea_cuda_registered = (linea::register_backend(linea::DeviceType::CUDA, cuda_backend_if_available), true);
}
