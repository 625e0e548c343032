// `ftplan validate --scale`: a smaller model of the same shape, to run a plan's step on this
// machine. (Split from validate.cpp.)
#pragma once

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "model/model.hpp"

namespace ftplan::exec {

// --scale: a smaller model of the same shape. 0 keeps a dimension.
struct Scale {
  int layers = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  int seq_len = 0;
  bool any() const { return layers > 0 || hidden > 0 || vocab > 0 || seq_len > 0; }
};
// "layers=4,hidden=256[,vocab=2048][,seq=256]". Throws UsageError naming the bad part.
Scale parse_scale(const std::string& text);
// The model with `scale` applied: head_dim, the heads : kv-heads and ffn : hidden ratios kept.
model::ModelSpec scaled(const model::ModelSpec& model, const Scale& scale);
// What scaling keeps and what it loses, for the report.
std::string scale_note(const model::ModelSpec& from, const model::ModelSpec& to, const Scale& scale);

}  // namespace ftplan::exec
