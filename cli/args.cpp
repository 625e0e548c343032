#include "args.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::cli {

Args::Args(const std::vector<std::string>& argv, std::size_t first, const std::vector<OptionSpec>& options) {
  std::vector<std::string> names;
  for (const auto& o : options) names.push_back("--" + o.name);
  for (std::size_t i = first; i < argv.size(); ++i)
    if (argv[i] == "--help" || argv[i] == "-h") throw HelpRequested("options:\n" + usage_of(options));
  for (std::size_t i = first; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() < 3 || a.rfind("--", 0) != 0) {
      if (a.size() > 1 && a[0] == '-' && a != "-")
        throw UsageError(fmt::format("unknown option '{}'{}", a, did_you_mean("-" + a, names)));
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const auto it = std::find_if(options.begin(), options.end(), [&](const OptionSpec& o) { return o.name == name; });
    if (it == options.end())
      throw UsageError(fmt::format("unknown option '--{}'{}", name, did_you_mean("--" + name, names)));
    if (it->takes_value && !has_value) {
      if (i + 1 >= argv.size()) throw UsageError(fmt::format("option '--{}' needs a value", name));
      value = argv[++i];
    } else if (!it->takes_value && has_value) {
      throw UsageError(fmt::format("option '--{}' takes no value", name));
    }
    // Given twice, one value would be dropped unseen: --set's items add up (as KEY=V,KEY2=V2 does),
    // any other option is refused.
    if (const auto have = values_.find(name); have != values_.end()) {
      if (name != "set")
        throw UsageError(
            fmt::format("option '--{}' is given twice ('{}', then '{}'): give it once", name, have->second, value));
      have->second += "," + value;
      continue;
    }
    values_[name] = value;
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  return std::nullopt;
}

std::string Args::value_or(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

std::string usage_of(const std::vector<OptionSpec>& options) {
  std::string out;
  for (const auto& o : options) out += fmt::format("  --{:<18} {}\n", o.name + (o.takes_value ? " X" : ""), o.help);
  return out;
}

}  // namespace ftplan::cli
