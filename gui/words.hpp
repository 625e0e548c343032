// Words between the core and Qt, for the window's widgets: a std::string as a QString, and an
// enum's names as the scenario reader takes them (its table, common/enum_names.hpp) as a combo
// box's choices.
#pragma once

#include <string>

#include <QString>
#include <QStringList>

#include "common/enum_names.hpp"

namespace ftplan::gui {

inline QString q(const std::string& s) { return QString::fromStdString(s); }

// The names of E's values after `first` (a combo's "as written").
template <class E>
QStringList choices(QStringList first = {}) {
  for (const std::string& name : names_of<E>()) first << q(name);
  return first;
}

// Bytes in a GiB (the GUI's DRAM and memory axes).
constexpr double kGiB = 1u << 30;

}  // namespace ftplan::gui
