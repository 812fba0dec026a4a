#include "linea/tensor/json.h"

#include <set>

#include <fmt/format.h>

#include "linea/tensor/error.h"

namespace linea::json {

const Value* Value::find(std::string_view key) const {
  for (const Member& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

std::string_view kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return "a boolean";
    case Value::Kind::Int: return "an integer";
    case Value::Kind::String: return "a string";
    case Value::Kind::Array: return "an array";
    case Value::Kind::Object: return "an object";
  }
  return "?";
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view context, int max_depth)
      : t_(text), context_(context), max_depth_(max_depth) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected characters after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("{} at byte {}: {}", context_, p_, what));
  }
  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  char peek() {
    skip_ws();
    if (p_ >= t_.size()) fail("unexpected end of the text");
    return t_[p_];
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++p_;
  }

  Value value(int depth) {
    if (depth > max_depth_) fail(fmt::format("nesting deeper than {} levels", max_depth_));
    const char c = peek();
    Value v;
    if (c == '{') {
      v.kind = Value::Kind::Object;
      ++p_;
      if (peek() == '}') return ++p_, v;
      std::set<std::string> keys;
      do {
        if (peek() != '"') fail("expected a string key");
        std::string key = string();
        if (!keys.insert(key).second) fail(fmt::format("duplicate key \"{}\"", key));
        expect(':');
        v.members.push_back({std::move(key), value(depth + 1)});
      } while (peek() == ',' && ++p_);
      expect('}');
    } else if (c == '[') {
      v.kind = Value::Kind::Array;
      ++p_;
      if (peek() == ']') return ++p_, v;
      do v.items.push_back(value(depth + 1));
      while (peek() == ',' && ++p_);
      expect(']');
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.s = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::Int;
      v.i = integer();
    } else if (literal("true")) {
      v.kind = Value::Kind::Bool;
      v.b = true;
    } else if (literal("false")) {
      v.kind = Value::Kind::Bool;
    } else if (!literal("null")) {
      fail(fmt::format("unexpected character 0x{:02x}", static_cast<unsigned char>(c)));
    }
    return v;
  }

  bool literal(std::string_view word) {
    if (t_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  // Integers only (no fraction or exponent: linea's files have none), range-checked to int64.
  int64_t integer() {
    const bool neg = t_[p_] == '-';
    if (neg) ++p_;
    if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') fail("expected a digit");
    uint64_t u = 0;
    const uint64_t limit = neg ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      const unsigned d = t_[p_++] - '0';
      if (u > (limit - d) / 10) fail("integer out of the int64 range");
      u = u * 10 + d;
    }
    if (p_ < t_.size() && (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E')) fail("expected an integer");
    return neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  }

  unsigned hex4() {
    if (t_.size() - p_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = t_[p_++];
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) fail("bad hex digit in \\u escape");
      v = v * 16 + d;
    }
    return v;
  }

  std::string string() {
    ++p_;  // the opening quote
    std::string out;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      const char c = t_[p_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated string");
      switch (const char e = t_[p_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, codepoint()); break;
        default: fail("bad escape in string");
      }
    }
  }

  // After "\u": one code point, joining a UTF-16 surrogate pair.
  uint32_t codepoint() {
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (!literal("\\u")) fail("high surrogate without its low half");
      const uint32_t lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return cp;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view t_;
  std::string_view context_;
  int max_depth_;
  size_t p_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view context, int max_depth) {
  return Parser(text, context, max_depth).document();
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

}  // namespace linea::json
