// This machine as the plan's cluster, for `ftplan validate`: the executor's CPU device as its GPU
// (at measured rates, as fractions of a nominal peak), its host and storage directories as the
// node's host and drives, and the simulator's efficiency figures for it. (Split from validate.cpp.)
#pragma once

#include "hardware/hardware.hpp"
#include "hardware/profile.hpp"
#include "plan/plan.hpp"
#include "rates.hpp"
#include "sim/simulate.hpp"

namespace ftplan::exec {

// `plan` on this machine: the GPU is the CPU device at `rates` with `device_bytes` of memory, the
// host this machine (a plan on the "local" node keeps its host: the calibration profile's), one
// drive per storage directory; and the efficiency figures to simulate it.
plan::Plan on_this_machine(const plan::Plan& plan, const DeviceRates& rates, double device_bytes, int storage_dirs);

// `cluster: {node: local}` in a scenario: this machine, as the catalog node "local" that
// `ftplan validate` adds before it reads the scenario. Its GPU is the executor's CPU device, its
// host the calibration profile's CPU (sockets, cores, threads, SIMD, DRAM bytes; DRAM bandwidth
// from the profile's best STREAM triad, else its firmware bound), its drives one "local-dir" per
// storage directory (sequential rates from the profile's 1 MiB runs where it has them). Returns
// `catalog` with the node and its parts added.
inline constexpr const char* kLocalNode = "local";
hardware::Catalog with_local_node(hardware::Catalog catalog, const hardware::CalibrationProfile& profile,
                                  int storage_dirs);
sim::Efficiency efficiency_of(const DeviceRates& rates);

}  // namespace ftplan::exec
