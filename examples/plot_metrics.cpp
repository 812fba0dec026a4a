// plot_metrics: a training run's loss and accuracy curves as PNG, from its metrics.csv (what
// vit_fmnist, char_lm and mqar write). Through gnuplot (data/plot.h).
//
//   plot_metrics runs/vit_fmnist_mhla            -> runs/vit_fmnist_mhla/loss.png, accuracy.png
//   plot_metrics path/to/metrics.csv [OUT_DIR]   (OUT_DIR defaults to the CSV's folder)
#include <filesystem>

#include <fmt/core.h>

#include "data/plot.h"
#include "flags.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2 || argc > 3 || std::string(argv[1]) == "--help") {
    fmt::print("usage: plot_metrics RUN_DIR | METRICS_CSV [OUT_DIR]\n"
               "  writes OUT_DIR/loss.png (columns named *loss*) and OUT_DIR/accuracy.png (*acc*) against step\n");
    return argc == 2 ? 0 : 2;
  }
  return flags::guarded_main("plot_metrics", [&] {
    std::string csv = argv[1];
    if (fs::is_directory(csv)) csv = (fs::path(csv) / "metrics.csv").string();
    const std::string out = argc == 3 ? argv[2] : fs::path(csv).parent_path().string();
    for (const std::string& f : linea::plot::plot_metrics(csv, out.empty() ? "." : out)) fmt::print("{}\n", f);
    return 0;
  });
}
