// Compiled with the tests: what <linea/linea.h> and `using namespace linea` bring into a user's
// program. The user API, and not the kernel interface (tensor/backend.h, which a backend author
// includes explicitly): neither Backend nor the op table's macros.
#include <linea/linea.h>

#ifdef LINEA_UNARY_OPS
#error "<linea/linea.h> brings in the op table's macros (tensor/ops.h)"
#endif

using namespace linea;

// A variable of this name is only legal where linea has no Backend class to clash with.
namespace linea {
[[maybe_unused]] constexpr int Backend = 0;
}  // namespace linea

[[maybe_unused]] static Tensor user_program(const Tensor& x) { return sin(x) * cos(x); }
