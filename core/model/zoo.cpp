#include "model/zoo.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace ftplan::model {

Zoo::Zoo(std::vector<ModelSpec> models) : all_(std::move(models)), all_read_(true) {
  for (const auto& m : all_) names_.push_back(m.name);
}

Zoo::Zoo(std::vector<std::string> names, Read read)
    : names_(std::move(names)), read_(std::move(read)), lazy_(std::make_unique<Lazy>()) {}

const ModelSpec* Zoo::find(const std::string& name) const {
  if (!read_) {
    auto it = std::find_if(all_.begin(), all_.end(), [&](const ModelSpec& m) { return m.name == name; });
    return it == all_.end() ? nullptr : &*it;
  }
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) return nullptr;
  const std::lock_guard lock(lazy_->mutex);
  auto& slot = lazy_->read[name];
  if (!slot) {
    try {
      slot = std::make_unique<ModelSpec>(read_(name));
    } catch (...) {
      lazy_->read.erase(name);
      throw;
    }
  }
  return slot.get();
}

std::vector<std::string> Zoo::names() const { return names_; }

const std::vector<ModelSpec>& Zoo::models() const {
  if (!read_) return all_;
  Diagnostics problems;
  std::vector<const ModelSpec*> each;
  for (const auto& n : names_) {
    try {
      each.push_back(find(n));
    } catch (const InputError& e) {
      problems.append(e.diagnostics());
    }
  }
  problems.throw_if_any();
  const std::lock_guard lock(lazy_->mutex);
  if (!all_read_) {
    for (const ModelSpec* m : each) all_.push_back(*m);
    all_read_ = true;
  }
  return all_;
}

}  // namespace ftplan::model
