// One name table per enum, in the manner of the format and datapath preset tables: rows of (name, value,
// description). Every enum a user names (a CLI flag, a Python keyword, a JSON or CSV field) declares its
// table as `std::span<const NameRow<E>> names(E)` next to its definition; parsing, printing, the lists in
// messages and the choices CLI11 checks all read that one table.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

template <class E>
struct NameRow {
  std::string_view name;
  E value;
  std::string_view description{};
};

// The value a name stands for (nullopt for any other text).
template <class E>
std::optional<E> parse_name(std::string_view text) {
  for (const NameRow<E>& row : names(E{})) {
    if (row.name == text) return row.value;
  }
  return std::nullopt;
}

// The name of a value ("?" for a value no row holds).
template <class E>
std::string_view name_of(E value) {
  for (const NameRow<E>& row : names(E{})) {
    if (row.value == value) return row.name;
  }
  return "?";
}

// Every name, in table order.
template <class E>
std::vector<std::string> name_strings() {
  std::vector<std::string> out;
  for (const NameRow<E>& row : names(E{})) out.emplace_back(row.name);
  return out;
}

// "a, b or c": the names for a message.
template <class E>
std::string name_list() {
  const auto rows = names(E{});
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += i + 1 == rows.size() ? " or " : ", ";
    out += rows[i].name;
  }
  return out;
}

// One line per name, "\n  name  description", names padded to one column: the choices under a flag's
// help text.
template <class E>
std::string name_help() {
  std::size_t width = 0;
  for (const NameRow<E>& row : names(E{})) width = std::max(width, row.name.size());
  std::string out;
  for (const NameRow<E>& row : names(E{})) {
    out += "\n  " + std::string(row.name);
    if (!row.description.empty()) out += std::string(width + 2 - row.name.size(), ' ') + std::string(row.description);
  }
  return out;
}

// The value `text` names, or UsageError "<what>: expected a, b or c, got 'text'".
template <class E>
E parse_name_or_throw(std::string_view text, std::string_view what) {
  if (auto value = parse_name<E>(text)) return *value;
  throw UsageError(std::string(what) + ": expected " + name_list<E>() + ", got '" + std::string(text) + "'");
}

}  // namespace fp4sim
