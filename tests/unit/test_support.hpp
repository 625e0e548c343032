// Shared by the test files: where the shipped zoo and test data are, loaded once.
#pragma once

#include <filesystem>
#include <string>

#include "hardware/hardware.hpp"
#include "model/zoo.hpp"

namespace ftplan::test {

inline std::filesystem::path zoo_dir() { return FTPLAN_ZOO_DIR; }
inline std::filesystem::path data_dir() { return FTPLAN_TEST_DATA; }

#ifdef FTPLAN_TEST_SCRATCH
// A path of this test process's own under the build tree's scratch folder ("NAME-PID"): never
// another process's (a second ctest, another checkout's tests), unlike a fixed name in /tmp.
std::filesystem::path scratch_path(const std::string& name);
#endif

const model::Zoo& zoo();
const hardware::Catalog& catalog();

// Message of the InputError `fn` throws, all diagnostics joined by newlines; "" if none is thrown.
template <class Fn>
std::string input_error_of(Fn&& fn);

}  // namespace ftplan::test

#include "common/error.hpp"

template <class Fn>
std::string ftplan::test::input_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ftplan::InputError& e) {
    return e.what();
  }
  return {};
}
