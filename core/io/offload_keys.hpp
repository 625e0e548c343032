// The keys of a plan's offload block besides its preset (docs/scenario-format.md), in the order the
// reader takes them and a written block gives them. One list for the scenario reader
// (scenario_io.cpp read_offload), the block a plan's changes write (scenario_edit.cpp
// offload_text) and the settings a change of preset drops where plan::check_offload refuses them
// (preset_changes). Internal to io.
#pragma once

#include <array>
#include <tuple>

#include "plan/plan.hpp"

namespace ftplan::io::detail {

template <class T>
struct OffloadKey {
  const char* key;
  T plan::Offload::*member;
  int min = 0, max = 0;  // an int's bounds
  bool bytes = false;    // a double: a quantity of bytes, at least 1 ("4 MiB")
};

// Where each kind of state lives: what a preset sets (plan::apply_preset), a key each.
inline constexpr std::array<OffloadKey<plan::Tier>, 5> kOffloadPlacements{{
    {"params", &plan::Offload::params},
    {"gradients", &plan::Offload::gradients},
    {"optimizer", &plan::Offload::optimizer},
    {"activations", &plan::Offload::activations},
    {"optimizer_step", &plan::Offload::optimizer_step},
}};

// The engine's settings, which no preset sets.
inline constexpr std::tuple kOffloadSettings{
    OffloadKey<bool>{"pinned", &plan::Offload::pinned},
    OffloadKey<int>{"prefetch_depth", &plan::Offload::prefetch_depth, 0, 1024},
    OffloadKey<int>{"buffer_count", &plan::Offload::buffer_count, 1, 1024},
    OffloadKey<int>{"optimizer_buffer_count", &plan::Offload::optimizer_buffer_count, 1, 1024},
    OffloadKey<double>{"buffer_size", &plan::Offload::buffer_bytes, 0, 0, true},
    OffloadKey<double>{"chunk_size", &plan::Offload::chunk_bytes, 0, 0, true},
    OffloadKey<bool>{"pipeline_read", &plan::Offload::pipeline_read},
    OffloadKey<bool>{"pipeline_write", &plan::Offload::pipeline_write},
    OffloadKey<bool>{"delayed_update", &plan::Offload::delayed_update},
};

template <class F>
void for_each_offload_setting(F&& f) {
  std::apply([&](const auto&... k) { (f(k), ...); }, kOffloadSettings);
}

}  // namespace ftplan::io::detail
