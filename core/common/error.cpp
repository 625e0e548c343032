#include "common/error.hpp"

#include <fmt/format.h>

namespace ftplan {

std::string Diagnostic::to_string() const {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += fmt::format(":{}", where.line);
      if (where.column > 0) out += fmt::format(":{}", where.column);
    }
    out += ": ";
  }
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

namespace {
std::string join(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += d.to_string();
  }
  return out;
}
}  // namespace

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : Error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

InputError::InputError(SourceLocation where, std::string key, std::string message)
    : InputError(std::vector<Diagnostic>{Diagnostic{std::move(where), std::move(key), std::move(message)}}) {}

void Diagnostics::error(SourceLocation where, std::string key, std::string message) {
  items_.push_back(Diagnostic{std::move(where), std::move(key), std::move(message)});
}

void Diagnostics::append(const std::vector<Diagnostic>& more) { items_.insert(items_.end(), more.begin(), more.end()); }

void Diagnostics::throw_if_any() const {
  if (!items_.empty()) throw InputError(items_);
}

namespace detail {
void assert_failed(const char* expr, std::string_view message, const char* file, int line) {
  throw std::logic_error(fmt::format("internal error: {} ({}) at {}:{}", message, expr, file, line));
}
}  // namespace detail

}  // namespace ftplan
