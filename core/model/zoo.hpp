// The model zoo: named model specs, as loaded from model_zoo/models/*.yaml. Immutable once loaded.
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"

namespace ftplan::model {

struct Zoo {
  std::vector<ModelSpec> models;  // sorted by name

  const ModelSpec* find(const std::string& name) const;
  std::vector<std::string> names() const;
};

}  // namespace ftplan::model
