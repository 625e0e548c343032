// One table of names per enum (issue 44): `to_string`, the YAML readers, the CLI's help and the
// GUI's choices all read it, so a value is named in one place. Each enum's table is a function
// `enum_table(E)` beside the enum, found by argument-dependent lookup:
//
//   inline std::span<const EnumName<Method>> enum_table(Method) {
//     static constexpr EnumName<Method> t[] = {{Method::full, "full"}, {Method::lora, "lora"}};
//     return t;
//   }
//
// The table's order is the order choices are offered in (help, error messages, GUI lists).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ftplan {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `v` ("?" for a value outside its table).
template <class E>
const char* name_of(E v) {
  for (const EnumName<E>& n : enum_table(E{}))
    if (n.value == v) return n.name;
  return "?";
}

// The value named `name`, if the table has it.
template <class E>
std::optional<E> value_named(std::string_view name) {
  for (const EnumName<E>& n : enum_table(E{}))
    if (name == n.name) return n.value;
  return std::nullopt;
}

// Every name, in the table's order.
template <class E>
std::vector<std::string> names_of() {
  std::vector<std::string> out;
  for (const EnumName<E>& n : enum_table(E{})) out.emplace_back(n.name);
  return out;
}

// "a, b, c": the names as help and messages list them; one string per enum, kept for the
// program's life (for tables of `const char*` help).
template <class E>
const char* names_joined() {
  static const std::string joined = [] {
    std::string out;
    for (const EnumName<E>& n : enum_table(E{})) out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
  }();
  return joined.c_str();
}

}  // namespace ftplan
