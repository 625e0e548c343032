// Edits YAML text in place, keeping its comments and layout: a value is replaced on its own line,
// a missing key is added under its parent at the parent's indentation, and every other line stays
// byte for byte as it was. yaml-cpp's emitter would drop the comments and re-flow the file; a
// person's scenario is theirs, so the GUI's controls edit the text through this instead.
//
// A key path names map keys and sequence items, dot-separated: "plans.1.cluster.gpus" is the key
// `gpus` of the mapping `cluster` of the second item of `plans`. Block mappings and sequences are
// followed, and single-line flow mappings and sequences ("{gpu: h100-sxm-80gb, gpus: 8}") too.
// Refused, with the reason, where an edit could not keep the text's meaning: a flow collection
// spanning lines, anchors and aliases (an edit would change every place that shares the node),
// tags and block scalars (| and >).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ftplan::io {

// `value` (one line of YAML: a scalar, or a flow collection such as "{preset: none}") at `path`,
// replacing what is there (a scalar, a flow collection, or a block collection with its lines); a
// missing key is added under its nearest present parent, the keys between written as nested flow
// mappings ("job: {micro_batch: 1}"). Throws InputError ("name:line:col: path: reason") when the
// path runs through a scalar, a missing sequence item or a refused node, or when the result would
// not read as YAML. `name` is what messages call the text.
std::string yaml_set(std::string_view text, std::string_view path, std::string_view value,
                     std::string_view name = "<text>");

// The text without the key at `path` (its line and its block's lines, or its entry of a flow
// mapping); the text unchanged when the key is absent. Refused as yaml_set refuses, and for the
// first key of a block sequence item (the item's "- " would go with it).
std::string yaml_erase(std::string_view text, std::string_view path, std::string_view name = "<text>");

// A new item at the end of the block sequence at `path` ("- key: value" lines, each key at the
// item's indentation, in the order given); the sequence is added at the end of the text when absent.
std::string yaml_append_item(std::string_view text, std::string_view path,
                             const std::vector<std::pair<std::string, std::string>>& keys,
                             std::string_view name = "<text>");

// The value at `path` as written (a scalar without its quotes, or a flow collection's text);
// nullopt when absent; "" for a block collection or an empty value.
std::optional<std::string> yaml_value(std::string_view text, std::string_view path, std::string_view name = "<text>");

// `s` as a plain YAML scalar when it reads back as itself, else double-quoted.
std::string yaml_scalar(std::string_view s);

}  // namespace ftplan::io
