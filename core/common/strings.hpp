// Small string helpers shared by the readers: edit distance for "did you mean", trimming, joining.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ftplan {

// Levenshtein distance (insert, delete, substitute each cost 1). With a bound: the distance where
// it is <= bound, else some number > bound, found without filling the rest of the table.
std::size_t edit_distance(std::string_view a, std::string_view b,
                          std::size_t bound = std::numeric_limits<std::size_t>::max());

// The candidate closest to `word` when it is close enough to be a likely typo
// (distance <= max(1, len/3)), else nullopt. Case differences count as half a typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// The candidates `word` most likely means: the closest_match if there is one, else every candidate
// that holds each of word's tokens (split at '-', '_', '.', ' ') as a whole token, in natural order
// ("h100" -> h100-pcie-80gb, h100-sxm-80gb; "4090" -> rtx-4090). Empty when nothing is close.
std::vector<std::string> likely_matches(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)", " (did you mean 'x' or 'y'?)" (from likely_matches), or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

std::string_view trim(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// A comma-separated list as a flag gives it ("a, b,c" -> {a, b, c}): items trimmed, empty ones dropped.
std::vector<std::string> split_list(std::string_view text);
std::string to_lower(std::string_view s);

// A display name as a plain snake_case identifier for a CSV column or JSON key: lower case, each
// run of other characters than [a-z0-9] one '_', none at either end ("host dram (share)" ->
// "host_dram_share", "gpu-gpu (pcie)" -> "gpu_gpu_pcie").
std::string identifier(std::string_view name);

// `s` as a double-quoted YAML scalar (escaped as JSON escapes, which YAML's double-quoted style
// accepts; other control characters as \xNN), appended to `out` or returned.
void append_yaml_quoted(std::string& out, std::string_view s);
std::string yaml_quoted(std::string_view s);

// Orders names with numbers by value: megatron-gpt-7.5b before megatron-gpt-18.4b.
bool natural_less(std::string_view a, std::string_view b);

}  // namespace ftplan
