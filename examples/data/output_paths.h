// Where a tool writes its results (attention_lab's --out, plot_metrics' output folder, mqar's
// --csv), checked before it computes anything, so a bad path costs a second, not the run.
// Each check writes and removes a probe file, because permissions do not tell (root may "write"
// to /proc, where nothing can be created). Errors are one line: "[program] WHAT 'path': ...".
//
//   make_output_dir("attention_lab", "--out", o.out);      // creates it, or says why it cannot
//   check_output_file("mqar", "--csv", o.csv);             // creates its folder; the file not yet
#pragma once
#include <string>

namespace linea::data {

// Creates `dir` and its parents where missing and checks that files can be created in it.
void make_output_dir(const std::string& program, const std::string& what, const std::string& dir);

// Checks that `path` can be written (atomically, as write_file_atomically does: a temp file beside
// it, then a rename): it is not a directory, and its folder exists (created here) and takes files.
void check_output_file(const std::string& program, const std::string& what, const std::string& path);

}  // namespace linea::data
