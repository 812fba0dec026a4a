// Writes the fuzzers' seed corpora, valid files made by linea's own writers, into DIR/<parser>/:
//   make_seeds DIR
// so that the seeds follow the formats as they evolve. The fuzz and fuzz_replay tests run it first.
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "data/text.h"
#include "fuzz_model.h"

using namespace linea;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  LINEA_CHECK(f.good(), "[make_seeds] writing {} failed", path.string());
}

std::string gzip(const std::string& bytes, const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "wb9");
  LINEA_CHECK(f && gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()) &&
                  gzclose(f) == Z_OK,
              "[make_seeds] gzip {} failed", path.string());
  return path.string();
}

std::string idx(const std::vector<uint32_t>& dims) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(i * 7 % 256);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* p : {"npy", "safetensors", "idx", "idx_gz", "vocab", "corpus"}) fs::create_directories(dir / p);
  Generator g(1);

  save_npy((dir / "npy/f32_2x3.npy").string(), randn({2, 3}, g, DType::Float32));
  save_npy((dir / "npy/f64_scalar.npy").string(), scalar(1.5, DType::Float64));
  save_npy((dir / "npy/i64_vector.npy").string(), arange(5));
  save_npy((dir / "npy/bool_2x2.npy").string(), tril_mask(2, 2));
  save_npy((dir / "npy/u8_empty.npy").string(), zeros({0, 3}, DType::UInt8));

  nn::save_safetensors((dir / "safetensors/every_dtype.safetensors").string(),
                       {{"f32", randn({2, 2}, g, DType::Float32)}, {"f64", scalar(2.0, DType::Float64)},
                        {"i64", arange(3)}, {"u8", zeros({2}, DType::UInt8)}, {"bool", tril_mask(1, 2)},
                        {"empty", zeros({0})}},
                       {{"step", "7"}, {"note", "a \"quoted\"\n\\u00e9 value"}});
  fuzz::CheckpointModel model;
  model.optimizer.zero_grad();
  sum(model.net.forward(ones({1, 3}))).backward();
  model.optimizer.step();
  nn::save_checkpoint((dir / "safetensors/checkpoint.safetensors").string(), model.net, model.optimizer,
                      {{"step", "1"}, {"loss_sum", "0.5"}});

  for (const auto& [name, dims] : {std::pair<const char*, std::vector<uint32_t>>{"images", {2, 4, 4}},
                                   {"labels", {6}}, {"empty", {0}}}) {
    write(dir / "idx" / (std::string(name) + ".idx"), idx(dims));
    gzip(idx(dims), dir / "idx" / (std::string(name) + ".idx.gz"));
    write(dir / "idx_gz" / (std::string(name) + ".idx"), idx(dims));
  }

  data::Vocab::from_text("hello world\n").save((dir / "vocab/vocab.json").string());
  write(dir / "corpus/text.txt", "to be or not to be\nthat is the question\n");
  write(dir / "corpus/bytes.txt", std::string("\x00\xff\x80 abc \xc3\xa9", 10));
  return 0;
}
