#include "model/zoo.hpp"

#include <algorithm>

namespace ftplan::model {

const ModelSpec* Zoo::find(const std::string& name) const {
  auto it = std::find_if(models.begin(), models.end(), [&](const ModelSpec& m) { return m.name == name; });
  return it == models.end() ? nullptr : &*it;
}

std::vector<std::string> Zoo::names() const {
  std::vector<std::string> out;
  for (const auto& m : models) out.push_back(m.name);
  return out;
}

}  // namespace ftplan::model
