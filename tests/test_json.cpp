// linea::json (tensor/json.h), the one JSON reader and writer behind safetensors headers, the
// character vocabulary and linea-check's reports: quoting, parse round trips, and malformed text
// as a linea::Error that names the caller's context and the byte.
#include <linea/tensor/json.h>

#include "helpers.h"

using namespace linea;
using json::Value;

TEST_CASE("json::quote: quotes, backslashes and control characters escaped; other bytes kept") {
  CHECK(json::quote("") == "\"\"");
  CHECK(json::quote("plain text") == "\"plain text\"");
  CHECK(json::quote("say \"hi\"") == R"("say \"hi\"")");
  CHECK(json::quote(R"(C:\dir\f)") == R"("C:\\dir\\f")");
  CHECK(json::quote("a\nb\tc\r") == R"("a\u000ab\u0009c\u000d")");
  CHECK(json::quote(std::string("nul\0end", 7)) == R"("nul\u0000end")");
  CHECK(json::quote("\x1f") == R"("\u001f")");
  CHECK(json::quote("caf\xc3\xa9 /") == "\"caf\xc3\xa9 /\"");  // UTF-8 and '/' as they are
}

TEST_CASE("json::parse: every quoted string parses back to itself") {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  for (const std::string& s : {std::string(), std::string("x"), std::string("\"\\\"\\"), all,
                               std::string("a\0b", 3)}) {
    const Value v = json::parse(json::quote(s), "test");
    CHECK(v.kind == Value::Kind::String);
    CHECK(v.s == s);
  }
  // Escapes a writer other than ours may use: short forms, \/, \u with a surrogate pair.
  CHECK(json::parse(R"("\b\f\n\r\t\/")", "test").s == "\b\f\n\r\t/");
  CHECK(json::parse(R"("\u00e9\ud83d\ude00")", "test").s == "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST_CASE("json::parse: objects keep their order, arrays, integers, booleans, null") {
  const Value v = json::parse(R"( {"b": [1, -2, 9223372036854775807, -9223372036854775808],
                                   "a": {"t": true, "f": false, "n": null}, "s": "x"} )", "test");
  REQUIRE(v.kind == Value::Kind::Object);
  REQUIRE(v.members.size() == 3);
  CHECK(v.members[0].key == "b");
  CHECK(v.members[1].key == "a");
  const Value* b = v.find("b");
  REQUIRE(b != nullptr);
  REQUIRE(b->items.size() == 4);
  CHECK(b->items[1].i == -2);
  CHECK(b->items[2].i == INT64_MAX);
  CHECK(b->items[3].i == INT64_MIN);
  const Value& a = *v.find("a");
  CHECK((a.find("t")->kind == Value::Kind::Bool && a.find("t")->b));
  CHECK((a.find("f")->kind == Value::Kind::Bool && !a.find("f")->b));
  CHECK(a.find("n")->kind == Value::Kind::Null);
  CHECK(v.find("missing") == nullptr);
  CHECK(b->find("b") == nullptr);  // not an object
  CHECK(json::kind_name(a.kind) == "an object");
}

TEST_CASE("json::parse: malformed text is an error naming the context, the byte and what is wrong") {
  auto fails = [](const std::string& text, const std::string& what) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(json::parse(text, "[reader] 'f': malformed JSON", 3), doctest::Contains(what.c_str()), Error);
  };
  fails("", "[reader] 'f': malformed JSON at byte 0: unexpected end of the text");
  fails("nope", "at byte 0: unexpected character 0x6e");
  fails("{\"a\" 1}", "at byte 5: expected ':'");
  fails("{\"a\": 1,}", "at byte 8: expected a string key");
  fails("{\"a\": 1, \"a\": 2}", "duplicate key \"a\"");
  fails("[1, 2", "unexpected end of the text");
  fails("[1] 2", "at byte 4: unexpected characters after the top-level value");
  fails("\"open", "unterminated string");
  fails("\"a\nb\"", "control character inside a string");
  fails(R"("\x")", "bad escape in string");
  fails(R"("\u12")", "truncated \\u escape");
  fails(R"("\u12g4")", "bad hex digit");
  fails(R"("\ude00")", "lone low surrogate");
  fails(R"("\ud83d")", "high surrogate without its low half");
  fails("1.5", "expected an integer");
  fails("1e3", "expected an integer");
  fails("-", "expected a digit");
  fails("9223372036854775808", "integer out of the int64 range");
  fails("[[[[1]]]]", "nesting deeper than 3 levels");
  CHECK(json::parse("[[[1]]]", "test", 3).items[0].items[0].items[0].i == 1);  // 3 levels are fine
}
