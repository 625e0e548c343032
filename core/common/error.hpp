// Errors: InputError for bad input (carries every problem found, each with its place),
// FTPLAN_ASSERT for programmer mistakes. The core throws; it never prints or exits.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ftplan {

// Where a value came from. line and column are 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

// One problem in one input: "file:line:column: key: message".
struct Diagnostic {
  SourceLocation where;
  std::string key;      // dotted path of the offending key, e.g. "plans[0].parallel.tp"; may be empty
  std::string message;  // what is wrong and what was expected

  std::string to_string() const;
};

// Bad input. Holds every diagnostic collected before it was thrown; what() joins them, one per line.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  InputError(SourceLocation where, std::string key, std::string message);

  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Collects diagnostics while a file is read, so a person sees all problems at once.
class Diagnostics {
 public:
  void error(SourceLocation where, std::string key, std::string message);
  void append(const std::vector<Diagnostic>& more);
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  // Throws InputError with everything collected, if anything was.
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> items_;
};

namespace detail {
[[noreturn]] void assert_failed(const char* expr, std::string_view message, const char* file, int line);
}  // namespace detail

// A broken internal invariant (a bug in ftplan, not in the input). Throws std::logic_error.
#define FTPLAN_ASSERT(cond, message)                                                    \
  do {                                                                                  \
    if (!(cond)) ::ftplan::detail::assert_failed(#cond, (message), __FILE__, __LINE__); \
  } while (0)

}  // namespace ftplan
