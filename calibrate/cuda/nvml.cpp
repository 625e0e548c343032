#include "calibrate/cuda/nvml.hpp"

#include <dlfcn.h>

#include <array>
#include <chrono>

#include "runtime/measure.hpp"

namespace ftplan::calibrate::gpu {

namespace {
// From nvml.h: nvmlReturn_t is an enum whose success value is 0; nvmlDevice_t an opaque pointer.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
}  // namespace

template <class F>
F Nvml::sym(const char* name) const {
  return lib_ ? reinterpret_cast<F>(dlsym(lib_, name)) : nullptr;
}

Nvml::Nvml() {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return;
  auto init = sym<nvmlReturn_t (*)()>("nvmlInit_v2");
  ok_ = init && init() == kNvmlSuccess;
}

Nvml::~Nvml() {
  if (ok_)
    if (auto shutdown = sym<nvmlReturn_t (*)()>("nvmlShutdown")) shutdown();
  if (lib_) dlclose(lib_);
}

std::string Nvml::driver_version() const {
  auto f = sym<nvmlReturn_t (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
  std::array<char, 96> buf{};
  if (!ok_ || !f || f(buf.data(), static_cast<unsigned>(buf.size())) != kNvmlSuccess) return {};
  return buf.data();
}

void* Nvml::device_by_pci_bus_id(const std::string& bus_id) const {
  auto f = sym<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>("nvmlDeviceGetHandleByPciBusId_v2");
  nvmlDevice_t d = nullptr;
  if (!ok_ || !f || f(bus_id.c_str(), &d) != kNvmlSuccess) return nullptr;
  return d;
}

double Nvml::power_w(void* device) const {
  auto f = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>("nvmlDeviceGetPowerUsage");
  unsigned mw = 0;
  if (!ok_ || !device || !f || f(device, &mw) != kNvmlSuccess) return -1;
  return mw / 1000.0;
}

int Nvml::max_pcie_gen(void* device) const {
  auto f = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>("nvmlDeviceGetMaxPcieLinkGeneration");
  unsigned v = 0;
  if (!ok_ || !device || !f || f(device, &v) != kNvmlSuccess) return 0;
  return static_cast<int>(v);
}

int Nvml::max_pcie_width(void* device) const {
  auto f = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>("nvmlDeviceGetMaxPcieLinkWidth");
  unsigned v = 0;
  if (!ok_ || !device || !f || f(device, &v) != kNvmlSuccess) return 0;
  return static_cast<int>(v);
}

void PowerSampler::start() {
  stop();
  readings_.clear();
  running_ = true;
  thread_ = std::thread([this] {
    while (running_.load()) {
      const double w = nvml_.power_w(device_);
      if (w >= 0) readings_.emplace_back(runtime::now_s(), w);
      std::this_thread::sleep_for(std::chrono::duration<double>(period_s_));
    }
  });
}

std::vector<double> PowerSampler::stop(double settle_s) {
  if (thread_.joinable()) {
    running_ = false;
    thread_.join();
  }
  std::vector<double> out;
  if (readings_.empty()) return out;
  const double t0 = readings_.front().first;
  for (const auto& [t, w] : readings_)
    if (t - t0 >= settle_s) out.push_back(w);
  if (out.empty()) out.push_back(readings_.back().second);
  return out;
}

}  // namespace ftplan::calibrate::gpu
