// linea_dist_die MODE: rank 1 leaves the job while rank 0 waits for it in an all_reduce.
//   exit   rank 1 exits at once with status 3 (as a crash would): mpirun ends the job
//   hang   rank 1 sleeps for ever: rank 0's wait times out (LINEA_DIST_TIMEOUT) and aborts the job
// Run by tests/dist/rank_dies.cmake; success is the job ending, with a clear message, soon.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <linea/dist/dist.h>
#include <linea/linea.h>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const linea::dist::World& w = linea::dist::init();
  linea::Tensor t = linea::ones({1000});
  linea::dist::all_reduce(t);  // everyone is here
  if (w.rank == 1) {
    if (mode == "exit") std::_Exit(3);
    for (;;) pause();
  }
  linea::dist::all_reduce(t);  // rank 1 never comes
  std::printf("rank 0 finished an all_reduce that rank 1 never joined\n");
  return 0;
}
