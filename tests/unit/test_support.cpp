#include "test_support.hpp"

#include <unistd.h>

#include "io/catalog_io.hpp"
#include "io/model_io.hpp"

namespace ftplan::test {

#ifdef FTPLAN_TEST_SCRATCH
std::filesystem::path scratch_path(const std::string& name) {
  std::filesystem::create_directories(FTPLAN_TEST_SCRATCH);
  return std::filesystem::path(FTPLAN_TEST_SCRATCH) / (name + "-" + std::to_string(::getpid()));
}
#endif

const model::Zoo& zoo() {
  static const model::Zoo z = io::load_zoo(zoo_dir());
  return z;
}

const hardware::Catalog& catalog() {
  static const hardware::Catalog c = io::load_catalog(zoo_dir());
  return c;
}

}  // namespace ftplan::test
