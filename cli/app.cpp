#include "app.hpp"

#include <cstdlib>
#include <filesystem>

#include "io/catalog_io.hpp"
#include "io/model_io.hpp"

#ifndef FTPLAN_ZOO_DIR
#define FTPLAN_ZOO_DIR "model_zoo"
#endif
#ifndef FTPLAN_ZOO_FROM_BIN
#define FTPLAN_ZOO_FROM_BIN "../share/ftplan/model_zoo"
#endif

namespace ftplan::cli {

namespace {

// The zoo installed beside this binary (cmake --install: PREFIX/bin/ftplan and
// PREFIX/share/ftplan/model_zoo), or "" when there is none (a build tree's binary).
std::string installed_zoo() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path zoo = (exe.parent_path() / FTPLAN_ZOO_FROM_BIN).lexically_normal();
  return std::filesystem::is_directory(zoo / "models", ec) ? zoo.string() : std::string();
}

}  // namespace

std::vector<OptionSpec> common_options() {
  return {{"zoo", true, "model zoo folder (default: $FTPLAN_ZOO, else the shipped model_zoo)"},
          {"format", true, "output: table (default), json or csv"}};
}

int parse_threads(const Args& args) {
  if (auto t = args.value("threads")) {
    int threads = -1;
    try {
      threads = std::stoi(*t);
    } catch (const std::exception&) {
    }
    if (threads <= 0) throw UsageError("--threads takes a positive whole number");
    return threads;
  }
  return 0;
}

App::App(const Args& args) {
  if (auto z = args.value("zoo"))
    zoo_dir_ = *z;
  else if (const char* env = std::getenv("FTPLAN_ZOO"); env && *env)
    zoo_dir_ = env;
  else if (std::string installed = installed_zoo(); !installed.empty())
    zoo_dir_ = std::move(installed);
  else
    zoo_dir_ = FTPLAN_ZOO_DIR;
  const std::string f = args.value_or("format", "table");
  if (f == "table")
    format_ = Format::table;
  else if (f == "json")
    format_ = Format::json;
  else if (f == "csv")
    format_ = Format::csv;
  else
    throw UsageError("--format takes table, json or csv; got '" + f + "'");
}

const model::Zoo& App::zoo() {
  if (!zoo_) zoo_ = io::lazy_zoo(zoo_dir_);
  return *zoo_;
}

const hardware::Catalog& App::catalog() {
  if (!catalog_) catalog_ = io::load_catalog(zoo_dir_);
  return *catalog_;
}

}  // namespace ftplan::cli
