// attention_lab's output (lab_report.h).
#include "lab_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/core.h>

#include "data/output_paths.h"
#include "data/plot.h"

namespace lab {

using linea::Tensor;
namespace fs = std::filesystem;

namespace {

// The kinds in the order they first appear, and the distinct values of N.
std::vector<std::string> kinds_of(const std::vector<Row>& rows) {
  std::vector<std::string> k;
  for (const Row& r : rows)
    if (std::find(k.begin(), k.end(), r.kind) == k.end()) k.push_back(r.kind);
  return k;
}

std::vector<int64_t> ns_of(const std::vector<Row>& rows) {
  std::vector<int64_t> n;
  for (const Row& r : rows)
    if (std::find(n.begin(), n.end(), r.N) == n.end()) n.push_back(r.N);
  return n;
}

const Row* find(const std::vector<Row>& rows, const std::string& kind, int64_t N) {
  for (const Row& r : rows)
    if (r.kind == kind && r.N == N) return &r;
  return nullptr;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string file_tag(const std::string& kind) {
  std::string t;
  for (char c : kind)
    if (c == ' ') t += '_';
    else if (c != '=') t += c;
  return t;
}

Report::Report(std::string out_dir) : out_(std::move(out_dir)) {
  linea::data::make_output_dir("attention_lab", "--out", out_);
  linea::data::make_output_dir("attention_lab", "--out", out_ + "/heatmaps");
}

void Report::heatmap(const std::string& name, const std::vector<Tensor>& maps, const std::vector<std::string>& labels,
                     const std::string& title, const std::string& caption, bool causal) {
  const int64_t N = maps.front().size(1);
  std::vector<Tensor> shown = maps;
  if (causal)  // what a query may not see is NaN: masked, not a small weight
    for (Tensor& m : shown) {
      std::vector<double> v = m.to_vector();
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = r + 1; c < N; ++c) v[size_t(r * N + c)] = NAN;
      m = linea::from_vector(v, {N, N});
    }
  const std::string path = fmt::format("{}/heatmaps/{}.png", out_, name);
  linea::plot::heatmap_plot(
      path, {.title = title,
             .caption = fmt::format("{}; uniform attention is 1/N = {:.2g}{}", caption, 1.0 / double(N),
                                    causal ? "; grey: masked (a query sees only earlier keys)" : ""),
             .cblabel = "attention weight (log scale)",
             .vmin = 0.01 / double(N),
             .vmax = 1,
             .log = true,
             .maps = shown,
             .labels = labels});
  heatmaps_.push_back(path);
}

void Report::heatmap_heads(const std::string& name, const std::vector<Tensor>& heads, const std::string& title,
                           const std::string& caption, bool causal) {
  Tensor mean = heads[0];
  std::vector<std::string> labels = {"head 0"};
  for (size_t h = 1; h < heads.size(); ++h) mean = mean + heads[h], labels.push_back(fmt::format("head {}", h));
  std::vector<Tensor> maps = heads;
  maps.push_back(mean / double(heads.size()));
  labels.push_back("mean of the heads");
  heatmap(name, maps, labels, title, caption, causal);
}

void Report::sweep_table(const std::string& title, const std::vector<Row>& rows) const {
  const std::vector<std::string> kinds = kinds_of(rows);
  fmt::print("\n{} (d = {}): rank (/ bound) and entropy ratio\n{:>6}", title, rows.front().d, "N");
  for (const std::string& k : kinds) fmt::print(" | {:<17}", k);
  fmt::print("\n");
  for (int64_t N : ns_of(rows)) {
    fmt::print("{:>6}", N);
    for (const std::string& k : kinds) {
      const Row* r = find(rows, k, N);
      if (!r) {
        fmt::print(" | {:<17}", "");
        continue;
      }
      const std::string rank = r->rank < 0 ? "-" : fmt::format("{}/{}", r->rank, r->bound);
      fmt::print(" | {:>10} {:.3f}", rank, r->entropy);
    }
    fmt::print("\n");
  }
}

void Report::trained_table(const std::string& title, const std::vector<Row>& rows) const {
  const std::vector<std::string> kinds = kinds_of(rows);
  fmt::print("\n{}\n{:<30}", title, "layer (N, d)");
  for (const std::string& k : kinds) fmt::print(" | {:<20}", k + " rank  ent");
  fmt::print("\n");
  std::vector<std::string> sources;
  for (const Row& r : rows)
    if (std::find(sources.begin(), sources.end(), r.source) == sources.end()) sources.push_back(r.source);
  for (const std::string& s : sources) {
    const Row* any = nullptr;
    std::string line;
    for (const std::string& k : kinds) {
      double rank = 0, ent = 0;
      int64_t n = 0, bound = 0;
      bool ranked = true;
      for (const Row& r : rows)
        if (r.source == s && r.kind == k) {
          rank += double(r.rank), ent += r.entropy, bound = r.bound, ++n, any = &r;
          ranked = ranked && r.rank >= 0;
        }
      if (n == 0) continue;
      const std::string rk = ranked ? fmt::format("{:.1f}/{}", rank / double(n), bound) : "-";
      line += fmt::format(" | {:>13} {:.3f}", rk, ent / double(n));
    }
    fmt::print("{:<30}{}\n", fmt::format("{} ({}, {})", s, any->N, any->d), line);
  }
}

void Report::claims(const std::vector<Row>& rows, const std::string& label, bool trained) const {
  auto verdict = [](bool ok) { return ok ? "holds" : "DOES NOT HOLD"; };
  // A bound is algebra and holds for any q, k; how sharp a trained model's maps are is not.
  const char* learned = trained ? " [learned: may change with training length]" : "";
  const int64_t d = rows.front().d;
  fmt::print("\nthe paper's claims, {} (measured):\n", label);
  // 1. linear: rank <= d at every N; entropy rising with N.
  std::vector<std::string> lin_rank, lin_ent;
  int64_t lin_ranked = 0, lin_at_d = 0;
  bool rank_ok = true, ent_rising = true;
  double prev = -1, first = 0, last = 0;
  for (const Row& r : rows)
    if (r.kind == "linear") {
      if (r.rank >= 0) {
        lin_rank.push_back(fmt::format("{}", r.rank)), rank_ok = rank_ok && r.rank <= d;
        ++lin_ranked, lin_at_d += r.rank == std::min(r.N, d);
      }
      lin_ent.push_back(fmt::format("{:.3f}", r.entropy));
      ent_rising = ent_rising && r.entropy >= prev;
      if (prev < 0) first = r.entropy;
      prev = last = r.entropy;
    }
  fmt::print("  linear attention's rank never exceeds d = {}: {}; reaches min(N, d) in {} of {} maps (ranks {})\n", d,
             verdict(rank_ok), lin_at_d, lin_ranked, join(lin_rank));
  fmt::print("  linear attention's entropy ratio rises toward 1 (uniform) at every doubling of N: {} ({}; {:.3f} -> "
             "{:.3f}){}\n",
             verdict(ent_rising && last > first), join(lin_ent), first, last, learned);
  // 2. MHLA: rank > d once N > d; never above Σ min(n_b, d); at each N not falling as M grows.
  bool above_d = true, grows = true, under = true;
  int64_t at_bound = 0, ranked = 0, past_d = 0, over_d = 0;
  std::vector<std::string> per_n;
  for (int64_t N : ns_of(rows)) {
    int64_t prev_rank = -1;
    std::vector<std::string> r_n;
    for (const Row& r : rows)
      if (r.N == N && r.kind.starts_with("mhla") && r.rank >= 0) {
        if (N > d) above_d = above_d && r.rank > d, ++past_d, over_d += r.rank > d;
        grows = grows && r.rank >= prev_rank;
        under = under && r.rank <= r.bound;
        at_bound += r.rank == r.bound, ++ranked;
        prev_rank = r.rank;
        r_n.push_back(fmt::format("{}/{}", r.rank, r.bound));
      }
    if (!r_n.empty()) per_n.push_back(fmt::format("N={}: {}", N, join(r_n)));
  }
  fmt::print("  MHLA's rank exceeds d = {} once N > d: {} ({} of {} maps){}\n", d, verdict(above_d), over_d, past_d,
             learned);
  fmt::print("  MHLA's rank never exceeds its bound sum_b min(n_b, d): {}; reaches it in {} of {} maps "
             "(rank/bound: {})\n",
             verdict(under), at_bound, ranked, join(per_n));
  fmt::print("  MHLA's rank does not fall as M grows, at each N: {}{}\n", verdict(grows), learned);
  // 3. softmax: full rank.
  int64_t full = 0, sm_ranked = 0;
  std::vector<std::string> sm;
  for (const Row& r : rows)
    if (r.kind == "softmax" && r.rank >= 0)
      full += r.rank == r.N, ++sm_ranked, sm.push_back(fmt::format("{}/{}", r.rank, r.N));
  fmt::print("  softmax is full rank (rank = N): {}; in {} of {} maps ({}){}\n", verdict(full == sm_ranked), full,
             sm_ranked, join(sm), learned);
}

void Report::plots(const std::string& prefix, const std::string& what, const std::vector<Row>& rows) {
  if (!linea::plot::gnuplot_available()) {
    fmt::print("\n(no gnuplot here: {}_rank.png and {}_entropy.png not drawn; apt-get install gnuplot-nox)\n", prefix,
               prefix);
    return;
  }
  linea::plot::LinePlot rank{
      .title = fmt::format("numerical rank of the N x N map: {}", what),
      .xlabel = "N (tokens)",
      .ylabel = "rank (singular values > tol x largest)",
      .caption = "solid: measured; dashed, same colour: that kind's rank bound (softmax N, linear min(N, d), "
                 "MHLA sum over blocks of min(block length, d))",
      .logx = true,
      .logy = true,
      .series = {}};
  linea::plot::LinePlot ent{.title = fmt::format("entropy ratio of the map's rows: {}", what),
                            .xlabel = "N (tokens)",
                            .ylabel = "entropy ratio",
                            .caption = "entropy ratio = mean row entropy / log(keys the row may see): 1 = uniform "
                                       "(the query singles out nothing), 0 = one-hot (one key)",
                            .logx = true,
                            .series = {}};
  const std::vector<std::string> kinds = kinds_of(rows);
  for (size_t i = 0; i < kinds.size(); ++i) {
    linea::plot::Series r{kinds[i], {}, {}, int64_t(i)}, b{kinds[i] + " bound", {}, {}, int64_t(i), true},
        e{kinds[i], {}, {}, int64_t(i)};
    for (const Row& row : rows)
      if (row.kind == kinds[i]) {
        if (row.rank >= 0) r.x.push_back(double(row.N)), r.y.push_back(double(row.rank));
        if (row.rank >= 0) b.x.push_back(double(row.N)), b.y.push_back(double(row.bound));
        e.x.push_back(double(row.N)), e.y.push_back(row.entropy);
      }
    if (!r.x.empty()) rank.series.push_back(b), rank.series.push_back(r);
    ent.series.push_back(e);
  }
  for (const auto& [plot, name] : {std::pair{&rank, "rank"}, std::pair{&ent, "entropy"}}) {
    const std::string path = fmt::format("{}/{}_{}.png", out_, prefix, name);
    plot->width = 1100, plot->height = 560;
    linea::plot::line_plot(path, *plot);
    others_.push_back(path);
  }
}

void Report::csv(const std::string& name, const std::vector<Row>& rows) {
  const std::string path = out_ + "/" + name;
  std::string text = "source,kind,N,d,head,rank,rank_bound,entropy_ratio\n";
  for (const Row& r : rows)
    text += fmt::format("{},{},{},{},{},{},{},{:.6f}\n", r.source, r.kind, r.N, r.d, r.head,
                        r.rank < 0 ? "" : std::to_string(r.rank), r.bound, r.entropy);
  linea::write_file_atomically(path, {text}, "attention_lab");
  others_.push_back(path);
}

void Report::files_written() const {
  fmt::print("\nwritten:\n  {} heatmaps in {}/heatmaps/ (each titled, with its colour bar and caption):\n",
             heatmaps_.size(), out_);
  std::map<std::string, std::vector<std::string>> by_source;  // random_, vit_, gpt_
  for (const std::string& p : heatmaps_) {
    const std::string name = fs::path(p).filename().string();
    by_source[name.substr(0, name.find('_'))].push_back(name);
  }
  for (const auto& [source, names] : by_source) fmt::print("    {}\n", join(names));
  for (const std::string& p : others_) fmt::print("  {}\n", p);
}

}  // namespace lab
