#include "app.hpp"

#include <cstdlib>

#include "io/catalog_io.hpp"
#include "io/model_io.hpp"

#ifndef FTPLAN_ZOO_DIR
#define FTPLAN_ZOO_DIR "model_zoo"
#endif

namespace ftplan::cli {

std::vector<OptionSpec> common_options() {
  return {{"zoo", true, "model zoo folder (default: $FTPLAN_ZOO, else the shipped model_zoo)"},
          {"format", true, "output: table (default), json or csv"}};
}

App::App(const Args& args) {
  if (auto z = args.value("zoo")) zoo_dir_ = *z;
  else if (const char* env = std::getenv("FTPLAN_ZOO"); env && *env) zoo_dir_ = env;
  else zoo_dir_ = FTPLAN_ZOO_DIR;
  const std::string f = args.value_or("format", "table");
  if (f == "table") format_ = Format::table;
  else if (f == "json") format_ = Format::json;
  else if (f == "csv") format_ = Format::csv;
  else throw UsageError("--format takes table, json or csv; got '" + f + "'");
}

const model::Zoo& App::zoo() {
  if (!zoo_) zoo_ = io::load_zoo(zoo_dir_);
  return *zoo_;
}

const hardware::Catalog& App::catalog() {
  if (!catalog_) catalog_ = io::load_catalog(zoo_dir_);
  return *catalog_;
}

}  // namespace ftplan::cli
