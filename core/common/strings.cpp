#include "common/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace ftplan {

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t bound) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    std::size_t row_min = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const std::size_t substitute = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min(std::min(up, row[j - 1]) + 1, substitute);
      row_min = std::min(row_min, row[j]);
      diag = up;
    }
    // Every path to the last cell crosses this row, and a row's minimum never falls going down
    // (Ukkonen 1985, "Algorithms for approximate string matching"): past the bound already.
    if (row_min > bound) return row_min;
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string lowered = to_lower(word);
  const double limit = std::max<double>(1.0, static_cast<double>(word.size()) / 3.0);
  // The first candidate at the smallest score, among those within the limit (none further can be
  // the answer). Scores are distances, or 0.5 for a match that differs only in case.
  std::optional<std::string> best;
  double best_score = 0;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: a candidate that differs by more than the
    // limit is skipped unread, so an unknown key that is a pasted blob costs no distance at all.
    const std::size_t gap = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    if (static_cast<double>(gap) > limit) continue;
    const std::string other = to_lower(c);
    double score = 0.5;  // a match that differs only in case is the likeliest typo of all
    if (other != lowered) {
      // Worth computing only to below the best so far (ties keep the first), or to the limit.
      const auto bound = static_cast<std::size_t>(best ? std::ceil(best_score) - 1 : std::floor(limit));
      const std::size_t d = edit_distance(lowered, other, bound);
      if (d > bound) continue;
      score = static_cast<double>(d);
    }
    if (!best || score < best_score) {
      best = c;
      best_score = score;
    }
  }
  if (best && *best != word) return best;
  return std::nullopt;
}

namespace {

std::vector<std::string> tokens_of(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : s) {
    if (c == '-' || c == '_' || c == '.' || c == ' ') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace

std::vector<std::string> likely_matches(std::string_view word, const std::vector<std::string>& candidates) {
  if (auto m = closest_match(word, candidates)) return {*m};
  // A short name for a long one: catalog names are tokens joined by '-' (h100-sxm-80gb), and people
  // type the token they know (h100, 4090). Every name holding all the typed tokens is a candidate.
  const std::vector<std::string> wanted = tokens_of(word);
  std::vector<std::string> out;
  if (wanted.empty()) return out;
  for (const auto& c : candidates) {
    if (c == word) return {};
    const std::vector<std::string> have = tokens_of(c);
    if (std::all_of(wanted.begin(), wanted.end(),
                    [&](const std::string& t) { return std::find(have.begin(), have.end(), t) != have.end(); }))
      out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::vector<std::string> m = likely_matches(word, candidates);
  if (m.empty()) return {};
  // Past a handful the list stops helping; the message's own list (or `hardware list`) has them all.
  constexpr std::size_t kShown = 6;
  std::string out = " (did you mean ";
  for (std::size_t i = 0; i < m.size() && i < kShown; ++i) {
    if (i) out += i + 1 == std::min(m.size(), kShown) && m.size() <= kShown ? " or " : ", ";
    out += "'" + m[i] + "'";
  }
  if (m.size() > kShown) out += fmt::format(" or {} more", m.size() - kShown);
  return out + "?)";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = std::min(text.find(','), text.size());
    if (const std::string_view item = trim(text.substr(0, comma)); !item.empty()) out.emplace_back(item);
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string identifier(std::string_view name) {
  std::string out;
  bool gap = false;
  for (const char ch : name) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      if (gap && !out.empty()) out += '_';
      out += c;
      gap = false;
    } else {
      gap = true;
    }
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      // Compare the numbers (with a decimal part) by value.
      std::size_t ei = i, ej = j;
      while (ei < a.size() && (digit(a[ei]) || (a[ei] == '.' && ei + 1 < a.size() && digit(a[ei + 1])))) ++ei;
      while (ej < b.size() && (digit(b[ej]) || (b[ej] == '.' && ej + 1 < b.size() && digit(b[ej + 1])))) ++ej;
      const double x = std::stod(std::string(a.substr(i, ei - i)));
      const double y = std::stod(std::string(b.substr(j, ej - j)));
      if (x != y) return x < y;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

void append_yaml_quoted(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\x";
          out += kHex[static_cast<unsigned char>(c) >> 4];
          out += kHex[static_cast<unsigned char>(c) & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string yaml_quoted(std::string_view s) {
  std::string out;
  append_yaml_quoted(out, s);
  return out;
}

}  // namespace ftplan
