// Reading the hardware catalog (model_zoo/hardware/*.yaml; docs/hardware-catalog.md).
#pragma once

#include <filesystem>

#include "hardware/hardware.hpp"

namespace ftplan::io {

// Reads gpus.yaml, hosts.yaml, drives.yaml, nics.yaml and nodes.yaml under `zoo_dir`/hardware,
// checks cross-references (a node's gpu, host, drives, nics) and reports every problem at once.
hardware::Catalog load_catalog(const std::filesystem::path& zoo_dir);

}  // namespace ftplan::io
