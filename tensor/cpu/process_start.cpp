// Settings that the OpenMP and BLAS runtimes read once, as they load, before main() and before
// any constructor of linea's: libgomp's spin count and OpenBLAS's kernel choice. A variable the
// user set is never changed.
//
// GOMP_SPINCOUNT=1000: a thread that finishes its share of a parallel region early spins about
// 1000 times (microseconds), then sleeps. A training step runs hundreds of short regions back to
// back: sleeping at once pays a futex wake-up at each, while libgomp's default (300000 spins,
// milliseconds) busy-waits beside the thread still working, and where another process holds a
// core it spins away that core's time slices (docs/benchmarks.md has the figures). OMP_WAIT_POLICY,
// if set, is the user's choice and is left to act (GOMP_SPINCOUNT would override it).
//
// LINEA_CPU_ISA (tensor/cpu_isa.h) caps OpenBLAS too, through OPENBLAS_CORETYPE: avx2 -> Haswell
// kernels, generic -> Prescott (SSE3), so that a capped run measures and tests that ISA throughout.
//
// How: libgomp and OpenBLAS read the environment in their own initialisers, which the loader runs
// before any of the program's code except its preinit array; and the C library, initialised after
// that array, resets the environment to the one the process started with, so a variable set there
// is lost. So when a setting is missing, the program's preinit function starts the program again,
// as it is (same arguments, same pid), with the setting added: about half a millisecond, once.
// Nothing happens where the variables are already set, in a setuid program, where /proc/self/exe
// cannot be run (the program then goes on with the runtimes' defaults), or under valgrind (which
// would not follow). CMakeLists.txt links this file into executables only: a shared library
// cannot have a preinit array.
#include <sys/auxv.h>
#include <unistd.h>

#include <cstring>

namespace {

// The value of `name` in env, or null.
const char* find(char** env, const char* name) {
  const std::size_t n = std::strlen(name);
  for (char** e = env; *e != nullptr; ++e)
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return nullptr;
}

void set_runtime_defaults(int, char** argv, char** env) {
  if (env == nullptr || getauxval(AT_SECURE) != 0) return;
  const char* preload = find(env, "LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) return;
  const char* add[2];
  int k = 0;
  if (find(env, "GOMP_SPINCOUNT") == nullptr && find(env, "OMP_WAIT_POLICY") == nullptr)
    add[k++] = "GOMP_SPINCOUNT=1000";
  const char* isa = find(env, "LINEA_CPU_ISA");
  if (isa != nullptr && find(env, "OPENBLAS_CORETYPE") == nullptr) {
    if (std::strcmp(isa, "avx2") == 0) add[k++] = "OPENBLAS_CORETYPE=Haswell";
    if (std::strcmp(isa, "generic") == 0) add[k++] = "OPENBLAS_CORETYPE=Prescott";
  }
  if (k == 0) return;
  int n = 0;
  while (env[n] != nullptr) ++n;
  char** next = static_cast<char**>(__builtin_alloca((n + k + 1) * sizeof(char*)));
  std::memcpy(next, env, n * sizeof(char*));
  for (int i = 0; i < k; ++i) next[n + i] = const_cast<char*>(add[i]);
  next[n + k] = nullptr;
  execve("/proc/self/exe", argv, next);  // returns only on failure: go on as we are
}

}  // namespace

// Named so the linker can be told to keep this file (-u linea_preinit_entry, CMakeLists.txt).
extern "C" __attribute__((used, section(".preinit_array"))) void (*const linea_preinit_entry)(int, char**,
                                                                                             char**) =
    set_runtime_defaults;
