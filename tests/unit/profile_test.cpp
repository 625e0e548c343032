#include <doctest/doctest.h>

#include <filesystem>

#include "io/profile_io.hpp"
#include "test_support.hpp"

using namespace ftplan;
using namespace ftplan::hardware;

namespace {

// A profile with every section filled, including values that are awkward to print and parse back:
// non-terminating binary fractions, 17-digit integers, quotes and backslashes in text.
CalibrationProfile full_profile() {
  CalibrationProfile p;
  p.machine.hostname = "node-07";
  p.machine.date = "2026-05-01T12:00:00Z";
  p.machine.ftplan_version = "0.1.0";
  p.machine.kernel = "Linux 6.1.0-18-amd64";
  p.machine.cpu = {"AMD EPYC 9654 96-Core Processor", 2, 192, 384, 2, "avx512", 1.5e12};
  p.machine.gpus = {{0, "NVIDIA H100 80GB HBM3", "9.0", 85520809984, 5, 16},
                    {1, "NVIDIA H100 80GB HBM3", "9.0", 85520809984, 5, 16}};
  p.machine.gpu_driver_version = "580.65.06";
  p.machine.cuda_runtime_version = "13.0";
  p.machine.drives = {{"/scratch/a", "nvme0n1", "Micron_9550 \"MAX\" \\ 6.4TB", false},
                      {"/scratch/b", "nvme1n1", "", false}};
  p.machine.notes = "line one\nline two";
  p.settings = {"quick", 5};
  p.gemm = {{Dtype::bf16,
             "llama-3.1-8b/mlp_up.fwd/t4096",
             4096,
             28672,
             4096,
             7.1234567890123e14,
             989.4e12,
             {7.1e14, 7.1234567890123e14, 7.2e14}},
            {Dtype::fp8, "", 8192, 8192, 8192, 1.3e15, 0, {1.3e15}}};
  p.attention = {{Dtype::bf16, "cudnn-sdpa", "bwd", 4, 32, 8, 4096, 128, true, 3.3e14, {3.2e14, 3.3e14, 3.4e14}}};
  p.memory = {{0, "copy", 1073741824, 2.9e12, 3.35e12, {2.8e12, 2.9e12, 3.0e12}}};
  p.copy = {{CopyDirection::h2d, true, 268435456, 5.5e10, 6.3e10, {5.4e10, 5.5e10}},
            {CopyDirection::bidir, false, 1048576, 0.1, 0, {0.1}},
            {CopyDirection::h2h, true, 67108864, 1.2345678901234568e+17, 0, {1.2345678901234568e+17}}};
  p.collectives = {{CollectiveOp::reduce_scatter, 8, 1 << 30, 3.6e11, {3.5e11, 3.6e11, 3.7e11}}};
  p.storage.runs = {{{"/scratch/a", "/scratch/b"},
                     StorageOp::read,
                     1 << 20,
                     32,
                     2.4e10,
                     22888.2,
                     {2.3e10, 2.4e10},
                     2.5e10,
                     {2.5e10, 2.6e10}},
                    {{"/scratch/a"}, StorageOp::randread, 4096, 64, 4.1e9, 1e6, {4.1e9}, 0, {}}};
  p.storage.sustained_write = {{{"/scratch/a"}, 1 << 20, 32, 2e11, 1.0, 6e9, 3.1e9, 9.6e10, {6e9, 6e9, 3.1e9, 3.1e9}}};
  p.cpu.dram_bound_Bps = 921.6e9;
  p.cpu.dram = {{"copy", 192, 1 << 30, 6.1e11, {6.0e11, 6.1e11}}, {"triad", 192, 1 << 30, 6.3e11, {6.3e11}}};
  p.cpu.optimizer = {{"adamw", 192, 1 << 28, 2.1e10, 28, 0.93, {2.0e10, 2.1e10, 2.2e10}}};
  p.power = {{0, "gemm_bf16", 690.5, {688, 690.5, 699}}, {1, "idle", 71, {71}}};
  return p;
}

}  // namespace

TEST_CASE("a calibration profile survives writing and reading back unchanged") {
  const CalibrationProfile p = full_profile();
  const std::string text = io::profile_to_yaml(p);
  const CalibrationProfile q = io::parse_profile(text, "roundtrip.yaml");
  CHECK(q.machine == p.machine);
  CHECK(q.settings == p.settings);
  CHECK(q.gemm == p.gemm);
  CHECK(q.attention == p.attention);
  CHECK(q.memory == p.memory);
  CHECK(q.copy == p.copy);
  CHECK(q.collectives == p.collectives);
  CHECK(q.storage == p.storage);
  CHECK(q.cpu == p.cpu);
  CHECK(q.power == p.power);
  CHECK(q == p);
  // And it is a fixed point: writing what was read gives the same text.
  CHECK(io::profile_to_yaml(q) == text);
}

TEST_CASE("a CPU-only profile (no GPU tables) round-trips with its empty sections") {
  CalibrationProfile p;
  p.machine.date = "2026-05-01T12:00:00Z";
  p.machine.cpu.model = "AMD EPYC";
  p.machine.notes = "no CUDA device found";
  p.cpu.dram = {{"triad", 2, 1e8, 1.8e10, {1.7e10, 1.8e10, 1.9e10}}};
  const std::string text = io::profile_to_yaml(p);
  CHECK(text.find("gemm: []") != std::string::npos);
  CHECK(text.find("gpus: []") != std::string::npos);
  CHECK(io::parse_profile(text, "cpu-only.yaml") == p);
}

TEST_CASE("a broken profile reports every problem with file, line, column and key") {
  const std::string text = R"(schema_version: 1
machine:
  date: "2026-05-01T12:00:00Z"
  cpu: {model: "x", cores: -3}
gemm:
  - dtype: bf17
    m: 4096
    n: 4096
    k: 0
    flops_per_s: 9e14
    samples: [1e14, 2e14]
copy:
  - direction: h2d
    pinned: maybe
    bytes: 1048576
    bandwidth_Bps: 2e10
    samples: []
storage:
  runs:
    - paths: [/tmp]
      op: read
      block_bytes: 1000
      queue_depth: 0
      bandwidth_Bps: 1e9
      samples: [1e9, fast]
cpu:
  optimiser: []
)";
  const std::string msg = test::input_error_of([&] { io::parse_profile(text, "bad.yaml"); });
  INFO(msg);
  CHECK(msg.find("bad.yaml:4:") != std::string::npos);
  CHECK(msg.find("machine.cpu.cores: must be between 0 and") != std::string::npos);
  CHECK(msg.find(
            "bad.yaml:6:12: gemm[0].dtype: 'bf17' is not one of fp32, tf32, bf16, fp16, fp8 (did you mean 'bf16'?)") !=
        std::string::npos);
  CHECK(msg.find("gemm[0].k: must be at least 1") != std::string::npos);
  // 9e14 is above both samples: a value is the median of its samples.
  CHECK(msg.find("bad.yaml:10:18: gemm[0].flops_per_s: 900000000000000 lies outside its samples") != std::string::npos);
  CHECK(msg.find("copy[0].pinned: expected true or false; got 'maybe'") != std::string::npos);
  CHECK(msg.find("copy[0].samples: needs at least one sample") != std::string::npos);
  CHECK(msg.find("storage.runs[0].block_bytes: must be a multiple of 512 (O_DIRECT); got 1000") != std::string::npos);
  CHECK(msg.find("storage.runs[0].queue_depth: must be between 1 and 65536; got 0") != std::string::npos);
  CHECK(msg.find("bad.yaml:25:22: storage.runs[0].samples[1]: expected a number; got 'fast'") != std::string::npos);
  CHECK(msg.find("cpu.optimiser: unknown key (did you mean 'optimizer'?)") != std::string::npos);
}

TEST_CASE("a profile of another schema version or without a machine is refused plainly") {
  const std::string msg = test::input_error_of([] { io::parse_profile("schema_version: 7\ngemm: []\n", "old.yaml"); });
  CHECK(
      msg.find("old.yaml:1:17: schema_version: this build of ftplan reads calibration profiles of version 1; got 7") !=
      std::string::npos);
  CHECK(msg.find("machine: is required") != std::string::npos);
  CHECK(test::input_error_of([] {
          io::load_profile(test::data_dir() / "no-such-profile.yaml");
        }).find("no such file") != std::string::npos);
}

TEST_CASE("the shipped dev-VM profile is valid and is what it says: CPU and storage, no GPU tables") {
  const auto p = io::load_profile(test::zoo_dir() / "hardware" / "profiles" / "dev-vm-cpu-storage.yaml");
  CHECK(p.machine.gpus.empty());
  CHECK(p.gemm.empty());
  CHECK(p.machine.notes.find("no CUDA device found") != std::string::npos);
  REQUIRE(p.cpu.optimizer.size() == 2);                                  // 1 thread and all threads
  for (const auto& o : p.cpu.optimizer) CHECK(o.triad_fraction >= 0.8);  // the issue's goal, met when measured
  CHECK_FALSE(p.storage.runs.empty());
  int beside_fio = 0;
  for (const auto& r : p.storage.runs) {
    CHECK_FALSE(r.samples.empty());
    beside_fio += r.fio_samples.empty() ? 0 : 1;
  }
  CHECK(beside_fio == 9);  // the full plan's configurations compared with fio
}
