// A strict, minimal JSON reader for tests (RFC 8259 syntax; rejects NaN/Infinity tokens, which docs/cli.md
// forbids in our output). Not part of the library.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace jsonmini {

struct Value;
using Object = std::map<std::string, Value>;
using Array = std::vector<Value>;

struct Value {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>> v;

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  bool is_number() const { return std::holds_alternative<double>(v); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(v); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v); }
  double num() const { return std::get<double>(v); }
  bool boolean() const { return std::get<bool>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  const Array& arr() const { return *std::get<std::shared_ptr<Array>>(v); }
  const Object& obj() const { return *std::get<std::shared_ptr<Object>>(v); }
  bool has(const std::string& k) const { return is_object() && obj().count(k); }
  const Value& operator[](const std::string& k) const { return obj().at(k); }
  const Value& operator[](std::size_t i) const { return arr().at(i); }
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}
  Value parse() {
    Value v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_) + ": '" + s_.substr(i_, 40) + "'");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(const char* lit) {
    const std::string l(lit);
    if (s_.compare(i_, l.size(), l) == 0) {
      i_ += l.size();
      return true;
    }
    return false;
  }
  Value value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return Value{string()};
    if (eat("null")) return Value{nullptr};
    if (eat("true")) return Value{true};
    if (eat("false")) return Value{false};
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail("unexpected token (NaN/Infinity are not JSON)");
  }
  Value number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else {
      if (i_ >= s_.size() || s_[i_] < '1' || s_[i_] > '9') fail("bad number");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad fraction");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad exponent");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    return Value{std::strtod(s_.substr(start, i_ - start).c_str(), nullptr)};
  }
  std::string string() {
    ++i_;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c == '\\') {
        if (i_ >= s_.size()) fail("bad escape");
        const char e = s_[i_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u':
            if (i_ + 4 > s_.size()) fail("bad \\u escape");
            out += '?';
            i_ += 4;
            break;
          default: fail("bad escape");
        }
      } else {
        out += c;
      }
    }
  }
  Value array() {
    ++i_;
    auto a = std::make_shared<Array>();
    ws();
    if (eat("]")) return Value{a};
    while (true) {
      a->push_back(value());
      ws();
      if (eat("]")) return Value{a};
      if (!eat(",")) fail("expected , or ]");
    }
  }
  Value object() {
    ++i_;
    auto o = std::make_shared<Object>();
    ws();
    if (eat("}")) return Value{o};
    while (true) {
      ws();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected key");
      std::string k = string();
      ws();
      if (!eat(":")) fail("expected :");
      if (o->count(k)) fail("duplicate key " + k);
      (*o)[k] = value();
      ws();
      if (eat("}")) return Value{o};
      if (!eat(",")) fail("expected , or }");
    }
  }
  const std::string& s_;
  std::size_t i_ = 0;
};

inline Value parse(const std::string& text) { return Parser(text).parse(); }

}  // namespace jsonmini
