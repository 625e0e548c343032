// The model zoo: named model specs, as loaded from model_zoo/models/*.yaml. Immutable once loaded
// (a zoo that reads each model when first asked for keeps what it read; see Zoo(names, read)).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace ftplan::model {

class Zoo {
 public:
  // Reads one model by name (a file's stem is its model's name): io::lazy_zoo's reader.
  using Read = std::function<ModelSpec(const std::string& name)>;

  // Every model already read.
  explicit Zoo(std::vector<ModelSpec> models = {});
  // The models of `names`, each read by `read` when first asked for: a verb that needs one model
  // does not read fifty (a sweep's process start read every file: 48 M instructions of 1,350 M).
  // `read` throws what the reader throws (InputError at the file); the zoo keeps nothing then.
  Zoo(std::vector<std::string> names, Read read);

  // The model, or null where the zoo has none of that name. Safe from several threads.
  const ModelSpec* find(const std::string& name) const;
  // Every name, sorted as the models are.
  std::vector<std::string> names() const;
  // Every model, sorted by name; a lazy zoo reads those it has not yet (each file's problems
  // reported together, as load_zoo reports them).
  const std::vector<ModelSpec>& models() const;

 private:
  // What a lazy zoo has read (behind a pointer: a zoo moves, a mutex does not).
  struct Lazy {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<ModelSpec>, std::less<>> read;
  };
  std::vector<std::string> names_;
  Read read_;  // empty: every model is in all_
  std::unique_ptr<Lazy> lazy_;
  mutable std::vector<ModelSpec> all_;
  mutable bool all_read_ = false;
};

}  // namespace ftplan::model
