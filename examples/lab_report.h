// What attention_lab writes: heatmaps (PNG), the rank/entropy tables (stdout), the claims of the
// MHLA paper checked against the measured rows, line plots (PNG) and one CSV of every row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <linea/linea.h>

namespace lab {

// One measured map: where its q, k came from, which kind of attention, and the two numbers.
struct Row {
  std::string source;  // "random", "vit layer 2", "gpt layer 0 causal", ...
  std::string kind;    // "softmax", "linear", "mhla M=16"
  int64_t N = 0, d = 0;
  int64_t head = 0;
  int64_t rank = -1;   // -1: not measured (N above --rank-max-n, or a causal map)
  int64_t bound = 0;   // the rank bound: N, min(N, d) or Σ_b min(n_b, d)
  double entropy = 0;  // mean row entropy / log(keys in the row)
};

// "mhla M=16" -> "mhla_M16": the kind's part of a file name.
std::string file_tag(const std::string& kind);

class Report {
 public:
  // Creates out_dir and out_dir/heatmaps, or throws saying why it cannot: the first thing
  // attention_lab does, so a bad --out fails before any training or measuring.
  explicit Report(std::string out_dir);

  // <out>/heatmaps/<name>.png: the maps side by side, each labelled, on one log colour scale for
  // N tokens, [0.01/N, 1] (uniform attention, 1/N, is the middle of the scale), under `title`
  // and over `caption` (what model, layer, input). `causal`: entries above the diagonal are
  // masked, drawn grey.
  void heatmap(const std::string& name, const std::vector<linea::Tensor>& maps, const std::vector<std::string>& labels,
               const std::string& title, const std::string& caption, bool causal = false);
  // One panel per head, then the heads' mean.
  void heatmap_heads(const std::string& name, const std::vector<linea::Tensor>& heads, const std::string& title,
                     const std::string& caption, bool causal = false);

  void sweep_table(const std::string& title, const std::vector<Row>& rows) const;    // one line per N
  void trained_table(const std::string& title, const std::vector<Row>& rows) const;  // per source, mean over heads
  // The paper's claims on a sweep's rows, each printed as holds / DOES NOT HOLD with the numbers;
  // `trained`: the q, k are a trained model's, and the claims that rest on what it learned (not on
  // algebra) say that they may change with training length.
  void claims(const std::vector<Row>& rows, const std::string& label, bool trained) const;
  // <out>/<prefix>_rank.png (each kind with its bound, dashed) and <prefix>_entropy.png against N,
  // titled with `what` the rows measured (skipped, with a note, without gnuplot).
  void plots(const std::string& prefix, const std::string& what, const std::vector<Row>& rows);
  void csv(const std::string& name, const std::vector<Row>& rows);
  void files_written() const;

 private:
  std::string out_;
  std::vector<std::string> heatmaps_, others_;
};

}  // namespace lab
