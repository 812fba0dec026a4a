// main() of the dist tests, run on every rank by mpirun (ctest test `dist`). Each rank runs every
// test case, so the collectives inside them meet; rank 0 reports, the others print only
// failures. Outside mpirun, or in a build without MPI, it prints why and exits 77 (Skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <linea/dist/dist.h>

int main(int argc, char** argv) {
  if (!linea::dist::built_with_mpi()) {
    std::printf("SKIPPED: linea was built without MPI (LINEA_DIST off: install libopenmpi-dev openmpi-bin)\n");
    return 77;
  }
  const linea::dist::World& w = linea::dist::init();
  if (w.size < 2) {
    std::printf("SKIPPED: the dist tests need at least 2 ranks: mpirun -np 2 %s\n", argv[0]);
    return 77;
  }
  doctest::Context ctx(argc, argv);
  if (w.rank != 0) ctx.setOption("minimal", true);
  return ctx.run();
}
