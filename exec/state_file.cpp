#include "state_file.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"
#include "io/output_file.hpp"

namespace ftplan::exec {

namespace {
constexpr std::uint64_t kStateMagic = 0x31545358454c5046ULL;  // "FPLEXST1" in little-endian order
constexpr std::size_t kStateHeader = 6;
}  // namespace

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

void write_state_file(const std::filesystem::path& path, std::uint64_t fingerprint, int steps_done, std::size_t params,
                      const SavedState& state) {
  const std::vector<float>& p = state.payload;
  FTPLAN_ASSERT(p.size() == 3 * params + state.kept, "a state's payload is 3 x params + the kept gradients");
  const std::uint64_t header[kStateHeader] = {kStateMagic, fingerprint, static_cast<std::uint64_t>(steps_done),
                                              params,      state.kept,  fnv1a(p.data(), p.size() * 4)};
  std::string text(sizeof header + p.size() * 4, '\0');
  std::memcpy(text.data(), header, sizeof header);
  std::memcpy(text.data() + sizeof header, p.data(), p.size() * 4);
  io::write_file_atomically(path, text);
}

std::optional<SavedState> read_state_file(const std::filesystem::path& path, std::uint64_t fingerprint,
                                          std::size_t params) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;  // no state yet: a fresh start
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bad = [&](const std::string& why) { return InputError({name, 0, 0}, "", why); };
  std::uint64_t h[kStateHeader] = {};
  if (text.size() < sizeof h) throw bad(fmt::format("not an executor state file ({} bytes)", text.size()));
  std::memcpy(h, text.data(), sizeof h);
  if (h[0] != kStateMagic) throw bad("not an executor state file");
  if (h[1] != fingerprint || h[3] != params)
    throw bad(
        "holds the state of another step (model, plan, scale or placement differ); remove it or give another file");
  SavedState s;
  s.kept = h[4];
  if (text.size() != sizeof h + (3 * params + s.kept) * 4)
    throw bad(fmt::format("{} bytes where the header says {}", text.size(), sizeof h + (3 * params + s.kept) * 4));
  if (fnv1a(text.data() + sizeof h, text.size() - sizeof h) != h[5])
    throw bad("checksum mismatch (the file is corrupt)");
  s.steps_done = static_cast<int>(h[2]);
  s.payload.resize(3 * params + s.kept);
  std::memcpy(s.payload.data(), text.data() + sizeof h, s.payload.size() * 4);
  return s;
}

int state_steps(const std::filesystem::path& state_file) {
  std::ifstream in(state_file, std::ios::binary | std::ios::ate);
  if (!in) return -1;
  const auto size = static_cast<std::uint64_t>(in.tellg());
  std::uint64_t h[kStateHeader] = {};
  in.seekg(0);
  if (size < sizeof h || !in.read(reinterpret_cast<char*>(h), sizeof h) || h[0] != kStateMagic ||
      size != sizeof h + (3 * h[3] + h[4]) * 4)
    return -1;
  return static_cast<int>(h[2]);
}

}  // namespace ftplan::exec
