// Sanity orderings of the shipped hardware catalog's prices and power figures (issue 15: the A100
// 40GB rented for more than the 80GB, and the DGX A100 40GB for more than the 80GB, because the
// entries mixed a band midpoint, one provider's list price and hyperscaler prices). Each rule holds
// for correct data; a figure that breaks one is either wrong or on another price basis than the
// rest (model_zoo/hardware/gpus.yaml header, docs/hardware-catalog.md "Price basis").
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "io/catalog_io.hpp"
#include "test_support.hpp"

using namespace ftplan;
using hardware::Catalog;
using hardware::GpuSpec;
using hardware::Price;
using hardware::Sources;

namespace {

// A derived node rate is gpus x the GPU rate, rounded to the cent: within 1%.
constexpr double kDerivedTolerance = 0.01;
// A named cloud instance (hyperscaler) costs 1x-3x the specialty-cloud basis of its GPUs
// (mercatus-ai.com/blog/cloud-gpu-pricing, 2026-05: hyperscaler A100/H100/H200 rates run up to ~2.7x
// the specialty band's low end).
constexpr double kInstanceMin = 1.0, kInstanceMax = 3.0;
// A whole node is never cheaper than its priced parts (2% for rounding), and an integrated system
// (NVSwitch baseboard, vendor margin) is at most 1.6x them (DGX B200: ~$500k on ~$336k of parts).
constexpr double kNodeMinOverParts = 0.98, kNodeMaxOverParts = 1.6;

std::string money(double v) { return fmt::format("${:.2f}", v); }

// "a100-sxm4-40gb" -> "a100-sxm4": the same GPU model and form factor with another memory size.
std::string family_of(const std::string& name) { return std::regex_replace(name, std::regex("-[0-9.]+gb$"), ""); }
// "a100-pcie-80gb" -> "a100": the chip, across form factors.
std::string chip_of(const std::string& name) { return name.substr(0, name.find('-')); }
bool module_form(const GpuSpec& g) { return g.form_factor == "sxm" || g.form_factor == "oam"; }

// Every price is cited by its own key (not only the entry's default), the citation carries a date,
// and the entry says when the price was read.
void check_cited(const std::string& what, const Price& p, const Sources& s, std::vector<std::string>& out) {
  static const std::regex year(R"(\b20[0-9]{2}\b)"), month(R"(^20[0-9]{2}-(0[1-9]|1[0-2])$)");
  const auto cited = [&](const char* key, bool present) {
    if (!present) return;
    const auto it = s.find(key);
    if (it == s.end())
      out.push_back(fmt::format("{}: {} has no source of its own (sources.{})", what, key, key));
    else if (!std::regex_search(it->second, year))
      out.push_back(fmt::format("{}: the source of {} carries no date: \"{}\"", what, key, it->second));
  };
  cited("price.purchase", p.purchase_usd.has_value());
  cited("price.cloud_hourly", p.cloud_usd_per_hour.has_value());
  if ((p.purchase_usd || p.cloud_usd_per_hour) && !std::regex_match(p.as_of, month))
    out.push_back(fmt::format("{}: price.as_of '{}' is not a month like 2026-05", what, p.as_of));
}

// `lo` must not cost more than `hi`, for both prices where both have them.
void not_cheaper(const GpuSpec& lo, const GpuSpec& hi, const std::string& why, std::vector<std::string>& out) {
  const auto cmp = [&](const char* field, const std::optional<double>& a, const std::optional<double>& b) {
    if (a && b && *b < *a)
      out.push_back(fmt::format("{} {} {} < {} {} ({})", hi.name, field, money(*b), lo.name, money(*a), why));
  };
  cmp("price.purchase", lo.price.purchase_usd, hi.price.purchase_usd);
  cmp("price.cloud_hourly", lo.price.cloud_usd_per_hour, hi.price.cloud_usd_per_hour);
}

// Every rule the shipped catalog must keep; one line per broken rule.
std::vector<std::string> catalog_price_problems(const Catalog& c) {
  std::vector<std::string> out;
  for (const auto& g : c.gpus) check_cited("gpus/" + g.name, g.price, g.sources, out);
  for (const auto& h : c.hosts) check_cited("hosts/" + h.name, h.price, h.sources, out);
  for (const auto& d : c.drives) check_cited("drives/" + d.name, d.price, d.sources, out);
  for (const auto& n : c.nics) check_cited("nics/" + n.name, n.price, n.sources, out);
  for (const auto& n : c.nodes) check_cited("nodes/" + n.name, n.price, n.sources, out);

  for (const auto& a : c.gpus)
    for (const auto& b : c.gpus) {
      if (&a == &b || a.vendor != b.vendor) continue;
      // More memory of the same GPU model and form factor never rents or costs less.
      if (family_of(a.name) == family_of(b.name) && a.form_factor == b.form_factor && a.memory_bytes < b.memory_bytes)
        not_cheaper(a, b, "more memory of the same model", out);
      if (chip_of(a.name) == chip_of(b.name) && a.memory_bytes == b.memory_bytes && a.form_factor == "pcie" &&
          module_form(b)) {
        // The SXM module of a chip is the full-power part: at least the PCIe card's price, power and bandwidth.
        not_cheaper(a, b, "SXM module vs PCIe card of the same chip and memory", out);
        if (b.memory_bandwidth_Bps < a.memory_bandwidth_Bps)
          out.push_back(fmt::format("{} memory bandwidth below {}'s", b.name, a.name));
      }
      // Same generation: a module (SXM/OAM) is never specified below a PCIe card's power.
      if (a.architecture == b.architecture && a.form_factor == "pcie" && module_form(b) && b.tdp_w < a.tdp_w)
        out.push_back(fmt::format("{} (module) tdp {} W < {} (PCIe) {} W, same generation {}", b.name, b.tdp_w, a.name,
                                  a.tdp_w, a.architecture));
    }

  // Within one fabric, a faster adapter never costs less.
  for (const auto& a : c.nics)
    for (const auto& b : c.nics)
      if (a.fabric == b.fabric && a.bandwidth_Bps < b.bandwidth_Bps && a.price.purchase_usd && b.price.purchase_usd &&
          *b.price.purchase_usd < *a.price.purchase_usd)
        out.push_back(fmt::format("nics/{} ({}) costs less than the slower nics/{} ({})", b.name,
                                  money(*b.price.purchase_usd), a.name, money(*a.price.purchase_usd)));

  for (const auto& n : c.nodes) {
    const auto* g = c.gpu(n.gpu);
    if (!g) continue;
    const auto& rate = n.price.cloud_usd_per_hour;
    const auto& gpu_rate = g->price.cloud_usd_per_hour;
    if (n.cloud_instance) {
      // A named cloud instance carries its provider's price, a hyperscaler premium over the basis.
      if (rate && gpu_rate) {
        const double basis = n.gpus * *gpu_rate;
        if (*rate < kInstanceMin * basis || *rate > kInstanceMax * basis)
          out.push_back(fmt::format("nodes/{}: cloud instance at {}/h, outside {}x-{}x of {} x {}'s {}/h = {}/h",
                                    n.name, money(*rate), kInstanceMin, kInstanceMax, n.gpus, g->name, money(*gpu_rate),
                                    money(basis)));
      }
      if (n.price.purchase_usd) out.push_back(fmt::format("nodes/{}: a cloud instance has no purchase price", n.name));
    } else if (rate) {
      // Any other node's rate is derived from its GPUs on the one basis of gpus.yaml.
      if (!gpu_rate) {
        out.push_back(
            fmt::format("nodes/{}: has a cloud rate but its GPU {} has none to derive it from", n.name, g->name));
      } else {
        const double derived = n.gpus * *gpu_rate;
        if (std::abs(*rate - derived) > kDerivedTolerance * derived)
          out.push_back(fmt::format("nodes/{}: cloud_hourly {}/h is not {} x {}'s {}/h = {}/h", n.name, money(*rate),
                                    n.gpus, g->name, money(*gpu_rate), money(derived)));
      }
    }
    if (n.price.purchase_usd && !n.cloud_instance) {
      double parts = n.gpus * g->price.purchase_usd.value_or(0);
      bool all_priced = g->price.purchase_usd.has_value();
      const auto* h = c.host(n.host);
      parts += h && h->price.purchase_usd ? *h->price.purchase_usd : 0;
      all_priced = all_priced && h && h->price.purchase_usd;
      for (const auto& d : n.drives) {
        const auto* spec = hardware::find_named(c.drives, d.name);
        parts += spec && spec->price.purchase_usd ? d.count * *spec->price.purchase_usd : 0;
        all_priced = all_priced && spec && spec->price.purchase_usd;
      }
      for (const auto& x : n.nics) {
        const auto* spec = hardware::find_named(c.nics, x.name);
        parts += spec && spec->price.purchase_usd ? x.count * *spec->price.purchase_usd : 0;
        all_priced = all_priced && spec && spec->price.purchase_usd;
      }
      const double price = *n.price.purchase_usd;
      if (price < kNodeMinOverParts * parts || (all_priced && price > kNodeMaxOverParts * parts))
        out.push_back(fmt::format("nodes/{}: purchase {} against {} of priced parts (allowed {}x-{}x)", n.name,
                                  money(price), money(parts), kNodeMinOverParts, kNodeMaxOverParts));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the shipped catalog's prices are cited, dated and ordered sanely") {
  const auto problems = catalog_price_problems(test::catalog());
  for (const auto& p : problems) FAIL_CHECK(p);
  CHECK(problems.empty());
}

TEST_CASE("the price sanity rules catch the inverted A100 prices of issue 15") {
  /* Copy the shipped catalog and put back the old A100 SXM 40GB rate: $1.99/h (one provider's list
   * price) beside the 80GB part's $1.30/h (a band midpoint). Expected: the memory ordering breaks,
   * and so does the DGX A100 40GB's rate, which is derived from the GPU rate (8 x $1.00 = $8.00). */
  const auto dir = test::scratch_path("price_sanity");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "hardware");
  for (const std::string f : io::kCatalogFiles)
    std::filesystem::copy_file(test::zoo_dir() / "hardware" / (f + ".yaml"), dir / "hardware" / (f + ".yaml"),
                               std::filesystem::copy_options::overwrite_existing);
  std::stringstream text;
  text << std::ifstream(dir / "hardware" / "gpus.yaml").rdbuf();
  std::string gpus = text.str();
  const auto at = gpus.find("cloud_hourly: $1.00/h", gpus.find("name: a100-sxm4-40gb"));
  REQUIRE(at != std::string::npos);
  gpus.replace(at, std::string("cloud_hourly: $1.00/h").size(), "cloud_hourly: $1.99/h");
  std::ofstream(dir / "hardware" / "gpus.yaml") << gpus;

  const auto problems = catalog_price_problems(io::load_catalog(dir));
  const auto shipped = catalog_price_problems(test::catalog());
  std::filesystem::remove_all(dir);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  CAPTURE(all);
  CHECK(all.find("a100-sxm4-80gb price.cloud_hourly $1.30 < a100-sxm4-40gb $1.99 (more memory of the same model)") !=
        std::string::npos);
  CHECK(all.find("nodes/dgx-a100-40gb: cloud_hourly $8.00/h is not 8 x a100-sxm4-40gb's $1.99/h = $15.92/h") !=
        std::string::npos);
  CHECK(problems.size() == shipped.size() + 2);
}
