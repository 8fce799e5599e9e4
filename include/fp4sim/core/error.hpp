// Errors are values at the boundary (docs/design.md): parsing and I/O throw these with a message naming the
// file and the rule broken; the CLI maps them to the exit codes of docs/cli.md.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fp4sim {

// An error whose message names a call's arguments by their key, never by a front end's spelling: `{key}`
// (`{key=true}` / `{key=false}` for one side of a switch), which each front end renders its own way
// (fp4sim/front/arguments.hpp: `--amax-ref-a`, `--no-snap` on the command line; `amax_ref_a`, `snap=False`
// in Python). what() shows the bare keys.
struct KeyedError : std::runtime_error {
  explicit KeyedError(const std::string& keyed_message);
  // The message as thrown, with its {key} marks, for a front end to render (or to pass on unrendered).
  const std::string& keyed() const noexcept { return keyed_; }

 private:
  std::string keyed_;
};

// A bad argument, unknown name or invalid combination: exit 2.
struct UsageError : KeyedError {
  using KeyedError::KeyedError;
};

// Unreadable or malformed input, shape mismatch, a value a format cannot hold: exit 3.
struct DataError : KeyedError {
  using KeyedError::KeyedError;
};

// Every `{key}` / `{key=true|false}` mark of `keyed` (a key: lower-case letters, digits and '_') replaced by
// spell(key, value), value "" for a plain key; any other text, braces included, left as it is.
template <class Spell>
std::string render_keys(std::string_view keyed, Spell spell) {
  std::string out;
  std::size_t i = 0;
  while (i < keyed.size()) {
    const std::size_t open = keyed.find('{', i);
    const std::size_t close = open == std::string_view::npos ? open : keyed.find('}', open);
    if (close == std::string_view::npos) break;
    const std::string_view mark = keyed.substr(open + 1, close - open - 1);
    const std::size_t eq = mark.find('=');
    const std::string_view key = mark.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : mark.substr(eq + 1);
    // A key is lower-case words joined by '_': it starts with a letter, so a regex count ("{2}", "{1,3}" in
    // a --layers pattern or a recipe map quoted back) is text.
    const bool is_key = !key.empty() && key.front() >= 'a' && key.front() <= 'z' &&
                        key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos &&
                        (eq == std::string_view::npos || value == "true" || value == "false");
    out += keyed.substr(i, open - i);
    if (!is_key) {  // a brace of other text ("{\"a\": {layout} ...}"): a mark may still follow it
      out += '{';
      i = open + 1;
      continue;
    }
    out += spell(key, value);
    i = close + 1;
  }
  out += keyed.substr(i);
  return out;
}

}  // namespace fp4sim
