#include "test_support.hpp"

#include "io/catalog_io.hpp"
#include "io/model_io.hpp"

namespace ftplan::test {

const model::Zoo& zoo() {
  static const model::Zoo z = io::load_zoo(zoo_dir());
  return z;
}

const hardware::Catalog& catalog() {
  static const hardware::Catalog c = io::load_catalog(zoo_dir());
  return c;
}

}  // namespace ftplan::test
