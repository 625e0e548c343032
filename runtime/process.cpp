#include "runtime/process.hpp"

#include <sched.h>
#include <time.h>

#include <fstream>
#include <string>

namespace ftplan::runtime {

std::int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

double peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmHWM:")) {
      try {
        return std::stod(line.substr(6)) * 1024.0;  // kB
      } catch (const std::exception&) {
        return -1;
      }
    }
  return -1;
}
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

BlockIo block_io() {
  BlockIo b;
  std::ifstream in("/proc/self/io");
  std::string key;
  double value = 0;
  int found = 0;
  while (in >> key >> value) {
    if (key == "read_bytes:") b.read = value, ++found;
    if (key == "write_bytes:") b.write = value, ++found;
  }
  b.ok = found == 2;
  return b;
}

bool pin_to(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : cores) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace ftplan::runtime
