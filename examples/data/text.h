// Character-level text: a byte vocabulary and a corpus split into train (first 90%) and val (last
// 10%) with random (x, y) windows for next-character prediction.
//
// Tokens are bytes, so any file works: ASCII maps one character to one token, and a multi-byte
// UTF-8 character becomes several tokens (a sample may then end in half a character).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include <linea/linea.h>

namespace linea::data {

// The distinct bytes of a corpus, sorted; a token id is the byte's rank.
class Vocab {
 public:
  Vocab() = default;
  static Vocab from_text(std::string_view text);
  // A small JSON file, {"format": "linea-char-vocab", "bytes": [10, 32, ...]}, kept beside a
  // checkpoint: the ids a model was trained with must survive a change of corpus file.
  void save(const std::string& path) const;
  static Vocab load(const std::string& path);

  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  Tensor encode(std::string_view text) const;  // int64 [len]; throws on a byte not in the vocab
  std::string decode(const Tensor& ids) const;  // int64 ids of any shape, read in row-major order

 private:
  explicit Vocab(std::vector<uint8_t> bytes);
  std::vector<uint8_t> bytes_;
  std::array<int16_t, 256> id_{};  // byte -> id, -1 when absent
};

struct TextBatch {
  Tensor x;  // int64 [B, T]: tokens i .. i+T-1 of a random window
  Tensor y;  // int64 [B, T]: tokens i+1 .. i+T, the next character at each position
};

class CharCorpus {
 public:
  // The whole file; its vocabulary is built from it, or given (to keep a checkpoint's ids).
  static CharCorpus from_file(const std::string& path);
  static CharCorpus from_file(const std::string& path, Vocab vocab);
  CharCorpus(std::string_view text, Vocab vocab);

  const Vocab& vocab() const { return vocab_; }
  int64_t size(std::string_view split) const;  // tokens in "train" or "val"
  // `batch` windows of `context` tokens at uniformly random offsets within the split.
  TextBatch get_batch(std::string_view split, int64_t batch, int64_t context, Generator& gen) const;

 private:
  std::pair<int64_t, int64_t> range(std::string_view split) const;  // [begin, end) in ids_
  Vocab vocab_;
  std::vector<uint8_t> ids_;  // the encoded text (ids < 256)
  int64_t n_train_ = 0;
};

// The default corpus, the King James Bible as plain text: $LINEA_DATA_DIR/kjv.txt, or data/kjv.txt
// in the source tree when the variable is unset or empty. scripts/prepare_data.sh makes it from
// Debian's bible-kjv package. A LINEA_DATA_DIR that is not a directory is an error naming it.
std::string default_corpus_path();

}  // namespace linea::data
