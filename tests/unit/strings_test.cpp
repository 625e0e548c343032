// The "did you mean" helpers every reader uses for unknown keys and names.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/strings.hpp"

using namespace ftplan;

namespace {

// closest_match as it was before it skipped candidates by length: every candidate's distance.
std::optional<std::string> closest_by_every_distance(std::string_view word,
                                                     const std::vector<std::string>& candidates) {
  const std::string lowered = to_lower(word);
  std::optional<std::string> best;
  double best_score = 0;
  for (const auto& c : candidates) {
    const double score = to_lower(c) == lowered ? 0.5 : static_cast<double>(edit_distance(lowered, to_lower(c)));
    if (!best || score < best_score) {
      best = c;
      best_score = score;
    }
  }
  const double limit = std::max<double>(1.0, static_cast<double>(word.size()) / 3.0);
  if (best && best_score <= limit && *best != word) return best;
  return std::nullopt;
}

}  // namespace

TEST_CASE("edit distance, and with a bound: exact within it, past it once sure") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting", 3) == 3);
  CHECK(edit_distance("kitten", "sitting", 2) > 2);
  CHECK(edit_distance("kitten", "sitting", 0) > 0);
  CHECK(edit_distance(std::string(5000, 'a'), std::string(5000, 'b'), 4) > 4);
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string a, b;
    for (std::size_t k = 0, n = rng() % 12; k < n; ++k) a += static_cast<char>('a' + rng() % 3);
    for (std::size_t k = 0, n = rng() % 12; k < n; ++k) b += static_cast<char>('a' + rng() % 3);
    const std::size_t d = edit_distance(a, b), bound = rng() % 8;
    if (d <= bound)
      CHECK(edit_distance(a, b, bound) == d);
    else
      CHECK(edit_distance(a, b, bound) > bound);
  }
}

TEST_CASE("closest_match names the likely typo, and skipping far-off lengths changes no answer") {
  const std::vector<std::string> keys = {"global_batch",  "micro_batch", "sequence_length", "tokens",  "gpu",
                                         "gpus_per_node", "nodes",       "zero_stage",      "Offload", "dp"};
  CHECK(closest_match("global_bach", keys) == std::optional<std::string>("global_batch"));
  CHECK(closest_match("GPU", keys) == std::optional<std::string>("gpu"));  // case alone: half a typo
  CHECK(closest_match("offload", keys) == std::optional<std::string>("Offload"));
  CHECK(closest_match("gpu", keys) == std::nullopt);  // the word itself is no suggestion
  CHECK(closest_match("zzzzzzzz", keys) == std::nullopt);
  CHECK(closest_match(std::string(100000, 'x'), keys) == std::nullopt);  // a pasted blob as a key

  // Random words near and far from random candidates, lengths 0-24 (the limit's boundary, len / 3,
  // included): the same answer as computing every distance.
  std::mt19937 rng(11);
  auto word = [&](std::size_t len) {
    std::string s;
    for (std::size_t i = 0; i < len; ++i) s += static_cast<char>("abcAB_-"[rng() % 7]);
    return s;
  };
  int suggested = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> candidates;
    for (std::size_t c = 0, n = 1 + rng() % 6; c < n; ++c) candidates.push_back(word(rng() % 16));
    std::string w = rng() % 2 ? candidates[rng() % candidates.size()] : word(rng() % 25);
    for (std::size_t e = 0, n = rng() % 4; e < n && !w.empty(); ++e) w[rng() % w.size()] = "abc"[rng() % 3];
    const auto expected = closest_by_every_distance(w, candidates);
    CHECK(closest_match(w, candidates) == expected);
    suggested += expected.has_value();
  }
  CHECK(suggested > 300);  // the draw reaches the suggesting branch, not only nullopt
}

TEST_CASE("split_list: a flag's comma-separated items, trimmed, empty ones dropped") {
  using V = std::vector<std::string>;
  CHECK(split_list("a, b,c") == V{"a", "b", "c"});
  CHECK(split_list(" /mnt/nvme0 , /mnt/nvme1,") == V{"/mnt/nvme0", "/mnt/nvme1"});
  CHECK(split_list(",,  ,") == V{});
  CHECK(split_list("") == V{});
  CHECK(split_list("one") == V{"one"});
}
