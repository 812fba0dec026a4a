// `--bench --attn all` in the examples: each attention kind is timed in a child process of its
// own, one after another, so that each peak RSS (getrusage) belongs to that kind alone.
// Call it before this process has run any OpenMP code: libgomp's thread pool does not survive fork().
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <initializer_list>

// Runs run(kind) in a fresh child for each kind; false when a fork fails or a child fails.
inline bool run_each_in_own_process(std::initializer_list<const char*> kinds,
                                    const std::function<void(const char*)>& run) {
  for (const char* kind : kinds) {
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      run(kind);
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  }
  return true;
}
