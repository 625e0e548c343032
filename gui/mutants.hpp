// Deliberate breakages of what the window shows (issue 43), to learn whether the window's tests
// see them: tests/gui/mutants.txt lists each with what it breaks, scripts/gui-mutants.sh builds
// with -DFTPLAN_GUI_MUTANTS=ON and runs tests/gui/ once per mutant. In that build mutant("NAME")
// is true when the environment's FTPLAN_GUI_MUTANT is NAME; in every other build it is false at
// compile time, and the branch it guards is dead code the compiler drops.
#pragma once

#include <string_view>

namespace ftplan::gui {

#if FTPLAN_GUI_MUTANTS
bool mutant(std::string_view name);
#else
constexpr bool mutant(std::string_view) { return false; }
#endif

}  // namespace ftplan::gui
