#include "machine.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::calibrate {

namespace fs = std::filesystem;

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return std::string(trim(line));
}

namespace {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        cpus.push_back(std::stoi(part));
      } else {
        for (int c = std::stoi(part.substr(0, dash)); c <= std::stoi(part.substr(dash + 1)); ++c) cpus.push_back(c);
      }
    } catch (const std::exception&) {
      return {};
    }
  }
  return cpus;
}

// Output of a fixed command line run through /bin/sh; "" when it cannot run.
std::string capture(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

}  // namespace

hardware::ProfileCpu read_cpu_identity() {
  hardware::ProfileCpu cpu;
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  std::set<std::string> sockets;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id;
  int processors = 0;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key(trim(std::string_view(line).substr(0, colon)));
    const std::string value(trim(std::string_view(line).substr(colon + 1)));
    if (key == "processor")
      ++processors;
    else if (key == "model name" && cpu.model.empty())
      cpu.model = value;
    else if (key == "physical id")
      physical_id = value, sockets.insert(value);
    else if (key == "core id")
      cores.insert({physical_id, value});
    else if ((key == "flags" || key == "Features") && flags.empty())
      flags = " " + value + " ";
  }
  if (cpu.model.empty()) cpu.model = "unknown CPU";
  cpu.sockets = sockets.empty() ? 1 : static_cast<int>(sockets.size());
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu.threads = online > 0 ? static_cast<int>(online) : processors;
  cpu.cores = cores.empty() ? cpu.threads : static_cast<int>(cores.size());
  const auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  cpu.simd = has("avx512f") ? "avx512"
             : has("avx2")  ? "avx2"
             : has("sve")   ? "sve"
             : has("asimd") ? "neon"
             : has("sse2")  ? "sse2"
                            : "scalar";
  int nodes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) ++nodes;
  }
  cpu.numa_nodes = std::max(1, nodes);
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line))
    if (line.rfind("MemTotal:", 0) == 0) {
      cpu.dram_bytes = std::stod(line.substr(9)) * 1024.0;  // reported in kB (KiB)
      break;
    }
  return cpu;
}

std::vector<int> numa_node_of_cpus() {
  std::vector<int> node_of;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() <= 4 || !std::isdigit(static_cast<unsigned char>(name[4]))) continue;
    const int node = std::stoi(name.substr(4));
    for (int c : parse_cpu_list(read_line(e.path() / "cpulist"))) {
      if (c >= static_cast<int>(node_of.size())) node_of.resize(static_cast<std::size_t>(c) + 1, -1);
      node_of[static_cast<std::size_t>(c)] = node;
    }
  }
  return node_of;
}

double last_level_cache_bytes() {
  double best = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    std::string size = read_line(e.path() / "size");  // "32768K"
    if (size.empty()) continue;
    double factor = 1;
    if (size.back() == 'K')
      factor = 1024;
    else if (size.back() == 'M')
      factor = 1024.0 * 1024;
    if (!std::isdigit(static_cast<unsigned char>(size.back()))) size.pop_back();
    try {
      best = std::max(best, std::stod(size) * factor);
    } catch (const std::exception&) {
    }
  }
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    best = static_cast<double>(std::max({0L, l3, l2}));
  }
  return best;
}

DriveInfo identify_drive(const fs::path& dir) {
  DriveInfo info;
  info.identity.path = dir.string();
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || major(st.st_dev) == 0) return info;  // tmpfs, overlay: no block device
  std::error_code ec;
  fs::path dev = fs::canonical(fmt::format("/sys/dev/block/{}:{}", major(st.st_dev), minor(st.st_dev)), ec);
  if (ec) return info;
  if (fs::exists(dev / "partition")) dev = dev.parent_path();  // sda1 -> sda
  info.identity.device = dev.filename().string();
  info.identity.rotational = read_line(dev / "queue" / "rotational") == "1";
  for (const char* f : {"device/model", "device/name"}) {
    if (auto m = read_line(dev / f); !m.empty()) {
      info.identity.model = m;
      break;
    }
  }
  if (info.identity.model.empty() && info.identity.device.rfind("vd", 0) == 0)
    info.identity.model = "virtio block device";
  // Walk up from the device to the first ancestor with a PCIe link (the NVMe controller's function).
  for (fs::path p = fs::canonical(dev / "device", ec); !ec && p.has_relative_path() && p != p.root_path();
       p = p.parent_path()) {
    const std::string speed = read_line(p / "current_link_speed");  // "16.0 GT/s PCIe"
    const std::string width = read_line(p / "current_link_width");  // "4"
    if (speed.empty() || width.empty()) continue;
    try {
      const double gts = std::stod(speed);
      const int gen = gts >= 60 ? 6 : gts >= 30 ? 5 : gts >= 15 ? 4 : gts >= 7.5 ? 3 : gts >= 4.5 ? 2 : 1;
      info.link = {gen, std::stoi(width)};
    } catch (const std::exception&) {
    }
    break;
  }
  return info;
}

DramBound dram_bound_from_dmidecode() {
  if (geteuid() != 0) return {};
  const std::string out = capture("dmidecode -t memory 2>/dev/null");
  if (out.empty()) return {};
  // One "Memory Device" block per slot; populated ones have a Size in MB/GB and a configured speed.
  static const std::regex size_re(R"(\n\s*Size:\s*(\d+)\s*(MB|GB))");
  static const std::regex speed_re(R"(\n\s*Configured (?:Memory|Clock) Speed:\s*(\d+)\s*MT/s)");
  int dimms = 0;
  double speed_sum = 0;
  std::size_t pos = 0;
  while ((pos = out.find("Memory Device", pos)) != std::string::npos) {
    const std::size_t next = out.find("Memory Device", pos + 1);
    const std::string block = out.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    pos = next == std::string::npos ? out.size() : next;
    std::smatch size, speed;
    if (std::regex_search(block, size, size_re) && std::regex_search(block, speed, speed_re)) {
      ++dimms;
      speed_sum += std::stod(speed[1]);
    }
  }
  if (dimms == 0) return {};
  const double mts = speed_sum / dimms;
  return {dimms * mts * 1e6 * 8.0,
          fmt::format("dmidecode: {} DIMMs x {:.0f} MT/s x 8 B (assumes one DIMM per channel)", dimms, mts)};
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return {};
  return buf.data();
}

std::string kernel_release() {
  utsname u{};
  if (uname(&u) != 0) return {};
  return fmt::format("{} {}", u.sysname, u.release);
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

}  // namespace ftplan::calibrate
