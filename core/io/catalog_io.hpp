// Reading the hardware catalog (model_zoo/hardware/*.yaml; docs/hardware-catalog.md).
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "hardware/hardware.hpp"
#include "plan/plan.hpp"

namespace YAML {
class Node;
}

namespace ftplan::io {

// The catalog's files, zoo_dir/hardware/KIND.yaml, each a list under the key KIND (expanders: CXL
// memory expanders).
inline constexpr auto kCatalogFiles = std::apply(
    [](const auto&... kind) {
      return std::array<const char*, 3 + sizeof...(kind)>{"gpus", "hosts", kind.key..., "nodes"};
    },
    plan::kDeviceKinds);

// Reads the catalog's files under `zoo_dir`/hardware, checks cross-references (a node's gpu,
// host, drives, nics, expanders) and reports every problem at once.
hardware::Catalog load_catalog(const std::filesystem::path& zoo_dir);
// The same from the files' text already in memory: `texts` maps each of kCatalogFiles to the
// content of that file (one left out reads as missing); `zoo_dir` names them.
hardware::Catalog parse_catalog(const std::map<std::string, std::string_view>& texts,
                                const std::filesystem::path& zoo_dir);

namespace detail {
// The reader behind both: each file zoo_dir/hardware/KIND.yaml as `load` gives it, parsed. For a
// caller that parses files once and reads them many times (the fuzzer keeps all but one and
// varies one: parsing the 91 KB of shipped YAML per input was 97% of its time). Nodes are only read.
hardware::Catalog read_catalog(const std::filesystem::path& zoo_dir,
                               const std::function<YAML::Node(const std::filesystem::path&)>& load);
}  // namespace detail

}  // namespace ftplan::io
