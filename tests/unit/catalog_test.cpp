#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include "io/catalog_io.hpp"
#include "io/yaml_reader.hpp"
#include "test_support.hpp"

using namespace ftplan;
using hardware::Dtype;

TEST_CASE("the catalog covers the GPUs people train on, each with a typical node and sources") {
  const auto& c = test::catalog();
  for (const char* name : {"v100-sxm2-16gb", "v100-sxm2-32gb", "v100-sxm3-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
                           "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm-80gb", "h100-pcie-80gb", "h100-96gb-500w",
                           "h200-sxm-141gb", "b200", "l40s", "l4", "rtx-4090", "rtx-6000-ada", "rtx-a6000", "mi300x"}) {
    CAPTURE(name);
    const auto* g = c.gpu(name);
    REQUIRE(g);
    CHECK(g->memory_bytes > 0);
    CHECK(g->memory_bandwidth_Bps > 0);
    CHECK(g->peak_for(Dtype::fp16) > 0);
    CHECK(g->tdp_w > g->idle_power_w);
    CHECK(c.default_node_for(name) != nullptr);
    // Each figure is cited, by its own key or by the entry's default.
    for (const char* field : {"memory", "memory_bandwidth", "peak", "tdp"})
      CHECK((g->sources.count(field) > 0 || g->sources.count("default") > 0));
  }
  for (const auto& n : c.nodes) {
    CAPTURE(n.name);
    CHECK(c.gpu(n.gpu));
    CHECK(c.host(n.host));
    CHECK(n.base_power_w > 0);
  }
  CHECK(c.drives.size() >= 4);
  CHECK(c.nics.size() >= 4);
}

TEST_CASE("catalog figures agree with the sourced reference (../shared/reference/hardware-figures.md)") {
  const auto& c = test::catalog();
  const auto* h100 = c.gpu("h100-sxm-80gb");
  REQUIRE(h100);
  CHECK(h100->peak_flops.at(Dtype::bf16) == doctest::Approx(989.4e12));
  CHECK(h100->peak_flops.at(Dtype::fp8) == doctest::Approx(1979e12));
  CHECK(h100->memory_bandwidth_Bps == doctest::Approx(3.35e12));
  CHECK(h100->tdp_w == 700);
  const auto* a100 = c.gpu("a100-sxm4-80gb");
  REQUIRE(a100);
  CHECK(a100->peak_flops.at(Dtype::bf16) == doctest::Approx(312e12));
  CHECK(a100->memory_bandwidth_Bps == doctest::Approx(2.039e12).epsilon(0.01));
  // Volta has no bf16 tensor cores: bf16 falls back to its fp16 peak for timing, and the
  // scenario checks refuse a bf16 recipe on it.
  const auto* v100 = c.gpu("v100-sxm2-32gb");
  REQUIRE(v100);
  CHECK(v100->peak_flops.count(Dtype::bf16) == 0);
  CHECK(v100->peak_for(Dtype::bf16) == v100->peak_flops.at(Dtype::fp16));
}

TEST_CASE("the offload papers' machines: a DGX-2 and a one-RTX-4090 workstation with many drives") {
  /* DGX-2 (datacenterdynamics.com / pcper.com, 2018-03; DGX-2 datasheet): 16 V100 32GB at 350 W on
   * NVSwitch, 2x Xeon Platinum 8168, 1.5 TB DRAM, 8x 3.84 TB NVMe = 30.72 TB, 10 kW.
   * Fuyou/LoHan (arXiv 2403.06504): one RTX 4090, 256 GB of DRAM, 12 NVMe drives in RAID-0. */
  const auto& c = test::catalog();
  const auto* dgx2 = c.node("dgx-2");
  REQUIRE(dgx2);
  CHECK(dgx2->gpus == 16);
  CHECK(dgx2->gpu_interconnect == hardware::GpuInterconnect::nvlink);
  CHECK(dgx2->max_power_w == doctest::Approx(10e3));
  const auto* v100 = c.gpu(dgx2->gpu);
  REQUIRE(v100);
  CHECK(v100->tdp_w == 350);
  CHECK(v100->memory_bytes == doctest::Approx(32e9));
  const auto* host = c.host(dgx2->host);
  REQUIRE(host);
  CHECK(host->cores() == 48);
  CHECK(host->dram_bytes == doctest::Approx(1.5 * 1099511627776.0));
  REQUIRE(dgx2->drives.size() == 1);
  CHECK(dgx2->drives[0].count * hardware::find_named(c.drives, dgx2->drives[0].name)->capacity_bytes ==
        doctest::Approx(30.72e12));

  const auto* ws = c.node("workstation-1x-rtx-4090-12x-nvme");
  REQUIRE(ws);
  CHECK(ws->gpus == 1);
  CHECK(ws->gpu == "rtx-4090");
  CHECK(c.host(ws->host)->dram_bytes == doctest::Approx(256.0 * 1073741824.0));
  REQUIRE(ws->drives.size() == 1);
  CHECK(ws->drives[0].count == 12);
  CHECK(c.default_node_for("rtx-4090")->name == "desktop-1x-rtx-4090");  // still the typical 4090 box
}

TEST_CASE("link arithmetic: PCIe per direction and DRAM channels") {
  /* PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s; Gen5 doubles it (63.0 GB/s). */
  CHECK(hardware::PcieLink{4, 16}.bandwidth_Bps() == doctest::Approx(31.5e9).epsilon(0.001));
  CHECK(hardware::PcieLink{5, 16}.bandwidth_Bps() == doctest::Approx(63.0e9).epsilon(0.001));
  CHECK(hardware::PcieLink{3, 16}.bandwidth_Bps() == doctest::Approx(15.75e9).epsilon(0.001));
  /* Two Sapphire Rapids sockets x 8 channels x 4800 MT/s x 8 B = 614.4 GB/s (Dell XE9680 manual). */
  hardware::HostSpec h;
  h.sockets = 2;
  h.dram_channels_per_socket = 8;
  h.dram_transfers_per_s = 4.8e9;
  CHECK(h.dram_bandwidth_Bps() == doctest::Approx(614.4e9));
}

TEST_CASE("a broken catalog reports every bad entry with file, line and key") {
  const auto dir = test::scratch_path("bad_catalog");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "hardware");
  for (const char* f : {"hosts.yaml", "drives.yaml", "nics.yaml", "expanders.yaml"})
    std::filesystem::copy_file(test::zoo_dir() / "hardware" / f, dir / "hardware" / f,
                               std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "hardware" / "gpus.yaml") << R"(schema_version: 1
gpus:
  - name: toy
    memory: 16 Gb
    memory_bandwidth: 1 TB/s
    peak: {fp32: 10 TFLOPS}
    tdp: 100 W
    idle_power: 10 W
    host_link: {pcie_gen: 4, lanes: 16}
    gemm_efficiency: 96%
    sources: {default: "test"}
)";
  std::ofstream(dir / "hardware" / "nodes.yaml") << R"(schema_version: 1
nodes:
  - name: box
    gpu: toy2
    gpus: 1
    host: xeon-8480c-2s
    base_power: 100 W
    sources: {default: "test"}
  - name: cloudy
    gpu: toy
    gpus: 1
    host: xeon-8480c-2s
    base_power: 100 W
    cloud_instance: true
    sources: {default: "test"}
)";
  const std::string msg = test::input_error_of([&] { io::load_catalog(dir); });
  const std::string gpus = (dir / "hardware" / "gpus.yaml").string();
  const std::string nodes = (dir / "hardware" / "nodes.yaml").string();
  CHECK(msg.find(gpus + ":4:13: gpus[0].memory: expected a size like '80 GiB' or '141 GB'; got '16 Gb': unknown unit "
                        "'Gb' (did you mean 'GB'?)") != std::string::npos);
  CHECK(msg.find(gpus + ":10:22: gpus[0].gemm_efficiency:") != std::string::npos);
  CHECK(msg.find(nodes + ":3:5: nodes[0].gpu: no GPU 'toy2' in gpus.yaml (did you mean 'toy'?)") != std::string::npos);
  CHECK(msg.find("nodes[1].cloud_instance: a named cloud instance needs its own price.cloud_hourly") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the catalog read from text in memory is the catalog read from its files, errors included") {
  /* parse_catalog is what the fuzzer drives (fuzz/readers_fuzz.cpp): it must be the same reader as
   * load_catalog, naming the same files, not a second one. */
  std::map<std::string, std::string> texts;
  for (const char* kind : io::kCatalogFiles) {
    std::ifstream in(test::zoo_dir() / "hardware" / (std::string(kind) + ".yaml"), std::ios::binary);
    texts[kind] = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::map<std::string, std::string_view> views(texts.begin(), texts.end());
  const auto from_files = io::load_catalog(test::zoo_dir());
  const auto from_text = io::parse_catalog(views, test::zoo_dir());
  CHECK(from_text.gpu_names() == from_files.gpu_names());
  CHECK(from_text.nodes.size() == from_files.nodes.size());
  CHECK(from_text.drives.size() == from_files.drives.size());
  /* One file left out reads as missing, named as load_catalog names it; a node naming a GPU that
   * is not there is reported at the node. */
  views.erase("nics");
  const std::string missing = test::input_error_of([&] { io::parse_catalog(views, "z"); });
  CHECK(missing.find((std::filesystem::path("z") / "hardware" / "nics.yaml").string() + ": no such file") !=
        std::string::npos);
  views = std::map<std::string, std::string_view>(texts.begin(), texts.end());
  views["gpus"] = "schema_version: 1\ngpus: []\n";
  const std::string dangling = test::input_error_of([&] { io::parse_catalog(views, "z"); });
  CHECK(dangling.find("no GPU 'h100-sxm-80gb' in gpus.yaml") != std::string::npos);
}

TEST_CASE("catalog files parsed once can be read again and again: the reader only reads the nodes") {
  /* The fuzzer parses the shipped files once and hands the same nodes to every input
   * (io::detail::read_catalog). A reader that changed them (a key inserted by a lookup, a value
   * removed) would make the second read differ from the first. */
  std::map<std::string, YAML::Node> parsed;
  for (const char* kind : io::kCatalogFiles)
    parsed[kind] = io::detail::load_yaml_file(test::zoo_dir() / "hardware" / (std::string(kind) + ".yaml"));
  const auto load = [&](const std::filesystem::path& p) { return parsed.at(p.stem().string()); };
  const auto first = io::detail::read_catalog("z", load);
  const auto second = io::detail::read_catalog("z", load);
  CHECK(second.gpu_names() == first.gpu_names());
  CHECK(second.nodes.size() == first.nodes.size());
  for (const char* kind : io::kCatalogFiles)
    CHECK(YAML::Dump(parsed.at(kind)) ==
          YAML::Dump(io::detail::load_yaml_file(test::zoo_dir() / "hardware" / (std::string(kind) + ".yaml"))));
}
