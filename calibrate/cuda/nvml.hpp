// NVML (NVIDIA Management Library) loaded at run time with dlopen, so ftplan needs neither its header
// (not in the CUDA toolkit on every system) nor the library at build time; it comes with the driver.
// Only the handful of calls the calibration uses are declared, with the signatures of nvml.h.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace ftplan::calibrate::gpu {

class Nvml {
 public:
  Nvml();  // loads libnvidia-ml.so.1 and initialises it; ok() says whether that worked
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ok() const { return ok_; }
  std::string driver_version() const;
  // The device with this PCI bus id ("0000:3b:00.0", as cudaDeviceGetPCIBusId gives it); nullptr if none.
  void* device_by_pci_bus_id(const std::string& bus_id) const;
  double power_w(void* device) const;  // board power now (Ampere and later: averaged over 1 s); -1 on failure
  // Highest PCIe generation and width the device and the system can run together; 0 when unknown.
  int max_pcie_gen(void* device) const;
  int max_pcie_width(void* device) const;

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
  template <class F>
  F sym(const char* name) const;
};

// Polls one device's power on a thread every `period_s` between start() and stop().
class PowerSampler {
 public:
  PowerSampler(const Nvml& nvml, void* device, double period_s = 0.02)
      : nvml_(nvml), device_(device), period_s_(period_s) {}
  ~PowerSampler() { stop(); }
  void start();
  // Stops and returns the readings (watts), dropping those of the first `settle_s` seconds, which NVML's
  // one-second averaging mixes with what ran before.
  std::vector<double> stop(double settle_s = 1.0);

 private:
  const Nvml& nvml_;
  void* device_;
  double period_s_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::vector<std::pair<double, double>> readings_;  // (time s, W)
};

}  // namespace ftplan::calibrate::gpu
