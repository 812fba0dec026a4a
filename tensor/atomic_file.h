// Files that are always whole: written to a temp file beside the target, fsynced, then renamed
// over it, so a crash, a kill -9 or a full disk mid-write leaves either the old file or the
// complete new one, never a truncated mix. Checkpoints and the examples' run files use it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace linea {

// Writes the concatenation of `parts` to `path` atomically. The temp file is
// "<path>.tmp.<pid>.XXXXXX" (the pid lets remove_stale_temp_files tell a killed writer's leftover
// from a live one's). Every failure is a linea::Error starting with "[op]" that says whether a
// previous `path` is still intact or there was none.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts,
                           const std::string& op);

// Deletes the temp files write_file_atomically left in `dir` when the process writing them died
// (its pid no longer runs); those of running processes are kept. Returns how many it removed.
int remove_stale_temp_files(const std::string& dir);

}  // namespace linea
