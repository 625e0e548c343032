// Errors: one hierarchy. Whatever ftplan reports to a person is an ftplan::Error, whose what() is
// the message as shown; its kind says whose the problem is (and the CLI's exit status):
//   InputError       bad input: every problem found, each with its file, line, column and key (2)
//   UsageError       a bad command-line argument or option value (2)
//   SystemError      the machine refused: a file that cannot be read or written, a full disk or
//                    tier, io_uring, a GPU or library that is not there, a helper tool that failed (1)
//   UnsupportedError valid input this build or machine cannot run as asked (built without CUDA, a
//                    collective on one machine, training a plan that updates one step late) (1)
// A broken invariant inside ftplan is FTPLAN_ASSERT (std::logic_error, "internal error: ..."), a
// bug to report, never an Error. The core throws; it never prints or exits.
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

// The root of the hierarchy above.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input. Holds every diagnostic collected before it was thrown; what() joins them, one per line.
class InputError : public Error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  InputError(SourceLocation where, std::string key, std::string message);

  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class SystemError : public Error {
 public:
  using Error::Error;
};

class UnsupportedError : public Error {
 public:
  using Error::Error;
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
