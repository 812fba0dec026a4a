// A small JSON reader and writer for linea's own files: safetensors headers, the character
// vocabulary, linea-check's reports. Objects, arrays, strings, integers, true/false/null; no
// fractions or exponents (none of those files has one). Every read is bounds-checked, nesting is
// limited, and a duplicate key is an error.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linea::json {

struct Value {
  enum class Kind { Null, Bool, Int, String, Array, Object } kind = Kind::Null;
  bool b = false;   // Bool
  int64_t i = 0;    // Int
  std::string s;    // String
  struct Member;    // a key and its value; a vector may hold an incomplete type, a std::pair may not
  std::vector<Value> items;     // Array
  std::vector<Member> members;  // Object, in file order

  // The member called `key` of an Object, or nullptr (also for any other kind).
  const Value* find(std::string_view key) const;
};
struct Value::Member {
  std::string key;
  Value value;
};

// "an object", "an integer", ...: for errors that say what was found instead.
std::string_view kind_name(Value::Kind k);

// Parses one JSON document (whitespace around it allowed). Malformed text throws linea::Error
// "<context> at byte N: <what is wrong>", e.g. context "[load_safetensors] 'f': malformed JSON header".
Value parse(std::string_view text, std::string_view context, int max_depth = 8);

// A JSON string literal: quotes and backslashes escaped, control characters as \u00XX; other
// bytes (UTF-8 included) as they are.
std::string quote(std::string_view s);

}  // namespace linea::json
