#include "data/text.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <linea/tensor/json.h>

#include "data/sampling.h"

namespace linea::data {

namespace {
constexpr std::string_view kVocabFormat = "linea-char-vocab";
// Our writer's file is under 2 KB; anything far larger is not a vocabulary.
constexpr std::uintmax_t kMaxVocabFile = 1 << 20;

// A directory, FIFO or device (say /dev/zero) would read as empty or never end.
void check_regular_file(std::string_view who, const std::string& path) {
  std::error_code ec;
  LINEA_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec),
              "[{}] {} is not a regular file", who, path);
}
}  // namespace

Vocab::Vocab(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {
  id_.fill(-1);
  for (size_t i = 0; i < bytes_.size(); ++i) id_[bytes_[i]] = static_cast<int16_t>(i);
}

Vocab Vocab::from_text(std::string_view text) {
  std::array<bool, 256> seen{};
  for (unsigned char c : text) seen[c] = true;
  std::vector<uint8_t> bytes;
  for (int b = 0; b < 256; ++b)
    if (seen[b]) bytes.push_back(static_cast<uint8_t>(b));
  return Vocab(std::move(bytes));
}

void Vocab::save(const std::string& path) const {
  const std::string text =
      fmt::format("{{\"format\": {}, \"bytes\": [{}]}}\n", json::quote(kVocabFormat), fmt::join(bytes_, ", "));
  write_file_atomically(path, {text}, "Vocab");  // never a half-written vocabulary beside a checkpoint
}

Vocab Vocab::load(const std::string& path) {
  check_regular_file("Vocab", path);
  std::ifstream f(path);
  LINEA_CHECK(f.good(), "[Vocab] cannot open {}", path);
  std::error_code ec;
  LINEA_CHECK(std::filesystem::file_size(path, ec) <= kMaxVocabFile, "[Vocab] {} is too large for a vocabulary file",
              path);
  const std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Only our own writer's layout is accepted: the format tag, then the "bytes" list of integers.
  const json::Value doc = json::parse(s, fmt::format("[Vocab] {}: malformed JSON", path));
  const json::Value* format = doc.find("format");
  const json::Value* list = doc.find("bytes");
  LINEA_CHECK(format != nullptr && format->kind == json::Value::Kind::String && format->s == kVocabFormat &&
                  list != nullptr && list->kind == json::Value::Kind::Array,
              "[Vocab] {} is not a vocabulary file (expected {{\"format\": \"{}\", \"bytes\": [...]}})", path,
              kVocabFormat);
  std::vector<uint8_t> bytes;
  for (const json::Value& item : list->items) {
    LINEA_CHECK(item.kind == json::Value::Kind::Int && item.i >= 0 && item.i < 256 &&
                    (bytes.empty() || item.i > bytes.back()),
                "[Vocab] {}: bad entry {} at index {} (the bytes must be distinct integers 0..255 in increasing order)",
                path, item.kind == json::Value::Kind::Int ? std::to_string(item.i) : std::string(json::kind_name(item.kind)),
                bytes.size());
    bytes.push_back(static_cast<uint8_t>(item.i));
  }
  LINEA_CHECK(!bytes.empty(), "[Vocab] {}: the vocabulary is empty", path);
  return Vocab(std::move(bytes));
}

Tensor Vocab::encode(std::string_view text) const {
  Tensor out = empty({static_cast<int64_t>(text.size())}, DType::Int64);
  int64_t* o = out.data<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    LINEA_CHECK(id_[b] >= 0, "[Vocab] byte {} at offset {} is not in the vocabulary of {} bytes", int{b}, i, size());
    o[i] = id_[b];
  }
  return out;
}

std::string Vocab::decode(const Tensor& ids) const {
  LINEA_CHECK(ids.dtype() == DType::Int64, "[Vocab] decode expects int64 ids, got {}", ids.dtype());
  const Tensor c = ids.contiguous();
  const int64_t* p = c.data<int64_t>();
  std::string out(c.numel(), '\0');
  for (int64_t i = 0; i < c.numel(); ++i) {
    LINEA_CHECK(p[i] >= 0 && p[i] < size(), "[Vocab] id {} out of range for a vocabulary of {}", p[i], size());
    out[i] = static_cast<char>(bytes_[p[i]]);
  }
  return out;
}

CharCorpus::CharCorpus(std::string_view text, Vocab vocab) : vocab_(std::move(vocab)) {
  const Tensor ids = vocab_.encode(text);
  ids_.assign(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
  n_train_ = static_cast<int64_t>(ids_.size()) * 9 / 10;
}

CharCorpus CharCorpus::from_file(const std::string& path) { return from_file(path, Vocab()); }

CharCorpus CharCorpus::from_file(const std::string& path, Vocab vocab) {
  check_regular_file("CharCorpus", path);
  std::ifstream f(path, std::ios::binary);
  LINEA_CHECK(f.good(), "[CharCorpus] cannot open {}{}", path,
              path == default_corpus_path()
                  ? " (the default corpus: make it with scripts/prepare_data.sh, or pass --data FILE)"
                  : "");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LINEA_CHECK(!text.empty(), "[CharCorpus] {} is empty", path);
  return CharCorpus(text, vocab.size() > 0 ? std::move(vocab) : Vocab::from_text(text));
}

std::pair<int64_t, int64_t> CharCorpus::range(std::string_view split) const {
  LINEA_CHECK(split == "train" || split == "val", "[CharCorpus] split must be \"train\" or \"val\", got \"{}\"",
              split);
  return split == "train" ? std::pair<int64_t, int64_t>{0, n_train_}
                          : std::pair<int64_t, int64_t>{n_train_, static_cast<int64_t>(ids_.size())};
}

int64_t CharCorpus::size(std::string_view split) const {
  const auto [begin, end] = range(split);
  return end - begin;
}

TextBatch CharCorpus::get_batch(std::string_view split, int64_t batch, int64_t context, Generator& gen) const {
  const auto [begin, end] = range(split);
  LINEA_CHECK(batch > 0 && context > 0, "[CharCorpus] batch and context must be positive, got {} and {}", batch,
              context);
  // A window needs context + 1 tokens: the inputs and, shifted by one, the targets.
  LINEA_CHECK(end - begin > context, "[CharCorpus] the {} split has {} tokens, too few for a context of {}", split,
              end - begin, context);
  TextBatch b{empty({batch, context}, DType::Int64), empty({batch, context}, DType::Int64)};
  int64_t* x = b.x.data<int64_t>();
  int64_t* y = b.y.data<int64_t>();
  for (int64_t i = 0; i < batch; ++i) {
    const uint8_t* w = ids_.data() + begin + random_below(gen, end - begin - context);
    for (int64_t t = 0; t < context; ++t) x[i * context + t] = w[t], y[i * context + t] = w[t + 1];
  }
  return b;
}

std::string default_corpus_path() {
  const char* dir = std::getenv("LINEA_DATA_DIR");
  if (dir == nullptr || *dir == '\0') return (std::filesystem::path(LINEA_SOURCE_DATA_DIR) / "kjv.txt").string();
  std::error_code ec;
  LINEA_CHECK(std::filesystem::is_directory(dir, ec),
              "[LINEA_DATA_DIR] '{}' is not a directory: set it to the folder holding kjv.txt "
              "(scripts/prepare_data.sh kjv makes it there), or unset it for {}",
              dir, LINEA_SOURCE_DATA_DIR);
  return (std::filesystem::path(dir) / "kjv.txt").string();
}

}  // namespace linea::data
