#include "mutants.hpp"

#if FTPLAN_GUI_MUTANTS
#include <cstdlib>
#include <string>

namespace ftplan::gui {

bool mutant(std::string_view name) {
  static const std::string active = [] {
    const char* v = std::getenv("FTPLAN_GUI_MUTANT");
    return std::string(v ? v : "");
  }();
  return active == name;
}

}  // namespace ftplan::gui
#endif
