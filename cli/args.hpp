// A small argv parser: positionals, "--name value", "--name=value" and boolean flags. Each verb
// declares the options it takes; anything else is a usage error with a "did you mean".
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace ftplan::cli {

using ftplan::UsageError;  // common/error.hpp

// `--help` or `-h` after a verb: what() is the verb's options, printed with status 0.
class HelpRequested : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;  // without dashes
  bool takes_value = true;
  std::string help;
};

class Args {
 public:
  // Parses argv[first..] against `options`. Throws UsageError, or HelpRequested for --help / -h.
  Args(const std::vector<std::string>& argv, std::size_t first, const std::vector<OptionSpec>& options);

  const std::vector<std::string>& positionals() const { return positionals_; }
  bool flag(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::string value_or(const std::string& name, const std::string& fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> values_;
};

std::string usage_of(const std::vector<OptionSpec>& options);

}  // namespace ftplan::cli
