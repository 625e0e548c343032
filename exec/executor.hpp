// The tiered-offload executor: runs a step IR (core/schedule/step_ir.hpp, the one description of a
// step the simulator lowers too) for real on a Device, with the plan's host DRAM and NVMe tiers.
// Each IR stream is an in-order worker thread; an op starts when its stream reaches it and its
// `deps` have finished. Tensors get real storage in their tier when their alloc op runs; copies
// move the IR's bytes between those storages (memcpy, or io_uring O_DIRECT on files striped over
// the storage directories); GEMMs and attention run at the IR's shapes and FLOPs; memory-bound
// kernels stream their bytes; the optimizer is calibrate's AdamW on real fp32 master weights,
// gradients and moments in the tiers the plan puts them.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "device.hpp"
#include "ir_checks.hpp"
#include "plan/plan.hpp"
#include "process.hpp"
#include "schedule/step_ir.hpp"
#include "trainer.hpp"

namespace ftplan::exec {

// The NVMe tier's own files, timed between steps: one read and one write pass over the tier's
// address space from its start to its high-water mark (at most kTierProbeBytes), by one ring at
// the run's queue depth and request size, after one untimed read; the write puts back what the
// read got. A probe's own
// files on the same directories read 1.7-2.3 GB/s where the run read its files at 5.6-6.9 on this
// VM's virtual disk (docs/validation.md): the rate is the files', so the run's are timed.
struct TierRates {
  double read_Bps = 0, write_Bps = 0;
  double bytes = 0;  // per pass
};
inline constexpr std::uint64_t kTierProbeBytes = std::uint64_t{256} << 20;

struct Options {
  int steps = 1;  // optimizer steps to run, each the IR once. REQUIRES: >= 1.
  // Directories of the NVMe tier's files (striped round-robin in `stripe_bytes` units). Needed
  // when the IR places anything on NVMe; each must be on a file system that takes O_DIRECT.
  std::vector<std::filesystem::path> storage_dirs;
  std::uint32_t stripe_bytes = 1 << 20;
  // I/Os in flight per NVMe stream and their size (DeepSpeed's aio defaults: queue_depth 8,
  // block_size 1 MiB; docs "aio" config).
  int io_queue_depth = 8;
  std::uint32_t io_block_bytes = 1 << 20;
  // Capacity of the host tier and of the NVMe files; 0 = what the IR's peak needs plus alignment.
  double host_capacity_bytes = 0;
  double nvme_capacity_bytes = 0;
  bool trace = false;  // keep a Chrome trace of the last step
  // On a device that computes on the host's cores (Device::computes_on_host) with two or more
  // cores allowed: the compute stream's worker gets the first core to itself and every other
  // worker the rest, as a GPU's SMs are apart from its copy engines and the host's cores (what
  // the simulator assumes). Unpinned, the kernel's scheduler may put a copy thread on the
  // compute thread's core, and the compute stream then runs at a share of it.
  bool pin_compute = true;
  std::function<void(const std::string&)> progress;
  // The on-flash training state (a file; put it on a storage directory). When set, after every
  // step the executor writes there, atomically (io::write_file_atomically), the fp32 master
  // weights, Adam's moments and the step count, and with delayed update the gradients the next
  // step applies: what a training job checkpoints (DeepSpeed's save_checkpoint keeps the fp32
  // master weights, the optimizer state and the global step). A run given a file that holds the
  // state of the same step IR continues after the file's last step, so a run killed with SIGKILL
  // and restarted ends with the uninterrupted run's parameters bit for bit. A file of a finished run
  // (every step done) is started over.
  std::filesystem::path state_file;
  // Called after each step's state is on flash, with the number of steps done.
  std::function<void(int steps_done)> on_state_written;
  // Time the NVMe tier's own files after each step (probe_tier), for after_step.
  bool probe_tier = false;
  // Called after each step (and its state), with the number of steps done, outside every step's
  // timing: steps do not overlap (each step's workers are joined before the next starts), so
  // what runs here (validate's rate probes) is in no step's wall time. `tier`: with probe_tier
  // and an NVMe tier, its files' read and write rates timed just before; else null.
  std::function<void(int steps_done, const TierRates* tier)> after_step;
  // Real training (trainer.hpp): the compute ops run the decoder on the 16-bit parameters the
  // step put where they read them; gradients, master weights and moments are the model's, and
  // the optimizer's updated 16-bit parameters go where the next step reads them. The CPU device,
  // a full or LoRA fine-tune of `train->shape` (training_of the plan's model) and no delayed
  // update; else the run stops with why. Unset: the kernels run at the IR's shapes on synthetic
  // operands.
  std::optional<Training> train;
};

struct StreamMeasure {
  std::string name;
  double busy_s = 0;
  double cpu_s = 0;  // CPU time of the stream's worker in its ops (OpRecord::cpu_ns)
};

// Bytes the IR moved over a link in one step and the time some op was moving them (the union of
// the ops' intervals). Names are the simulator's (sim/simulate.cpp representative_links).
struct LinkMeasure {
  std::string name;
  double bytes = 0;
  double busy_s = 0;
};

struct OpRecord {
  int op = -1;
  std::int64_t start_ns = 0, end_ns = 0;
  // CPU time of the worker thread in the op (CLOCK_THREAD_CPUTIME_ID): on a machine shared with
  // other work, what the op cost without the waits for a core (an NVMe op's waits for its drive
  // are not in it either).
  std::int64_t cpu_ns = 0;
  int core = -1;  // the core the op's worker ended it on (sched_getcpu)
};

// What the last step moved, counted where it moved (the executor's copy and NVMe calls, each
// call's bytes as made, NVMe requests rounded up to the I/O alignment), and what the kernel's
// block-I/O counters for the process saw over the same step (-1 where /proc/self/io is
// unreadable): figures apart from the IR's nominal op sizes, which the links report.
struct Counted {
  double h2d_bytes = 0, d2h_bytes = 0;
  double nvme_read_bytes = 0, nvme_write_bytes = 0;
  double block_read_bytes = -1, block_write_bytes = -1;
};

struct Measured {
  bool ok = true;
  std::string problem;                 // why the run stopped, when !ok
  int first_step = 0;                  // the step the run began with (> 0: resumed from Options::state_file)
  std::vector<double> step_s;          // each step's wall time (of the steps this run ran)
  double step_time_s = 0;              // the median over the steps after the first (all when one)
  std::vector<StreamMeasure> streams;  // of the last step
  std::vector<LinkMeasure> links;      // of the last step
  double device_peak_bytes = 0;        // arena high-water mark over the run (bytes the IR asked for)
  double device_scratch_bytes = 0;     // the kernels' buffers beyond it at the end (Device::scratch_bytes)
  // The process's peak resident memory over the run's steps (VmHWM after resetting it at the
  // first step, proc(5) clear_refs 5): device arena, host tier, scratch, probes, everything; -1
  // where the kernel does not let it be reset or read.
  double process_peak_rss_bytes = -1;
  double host_peak_bytes = 0;
  double nvme_peak_bytes = 0;
  bool host_pinned = false;       // the host tier is mlock'd
  std::string host_note;          // pinned or pageable, and why
  double nvme_written_bytes = 0;  // of the last step
  Counted counted;                // of the last step
  std::vector<float> master;      // the fp32 master weights after the last step
  // With Options::train: each step's loss (the mean over its micro-batches, of the steps this run
  // ran) and the 16-bit parameters after the last step, in decoder::Layout order.
  std::vector<double> losses;
  std::vector<std::uint16_t> weights16;
  std::vector<OpRecord> ops;       // of the last step, in completion order per stream
  std::vector<std::string> notes;  // where the IR did not say something the executor needed
  std::string trace_json;          // with Options::trace
};

// Runs `ir` (one rank's step of `plan`) `options.steps` times on `device`. Input the executor
// cannot run (collectives over several ranks, gradients on NVMe, a tensor that does not fit)
// comes back as ok = false with the problem; it never throws for such input.
Measured run(const schedule::StepIR& ir, const plan::Plan& plan, Device& device, const Options& options);

// Steps done by the state in `state_file` (Options::state_file; exec/state_file.hpp); -1 when there is none or it is
// not a whole state file.
int state_steps(const std::filesystem::path& state_file);

}  // namespace ftplan::exec
