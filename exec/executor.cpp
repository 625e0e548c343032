#include "executor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "arena.hpp"
#include "common/error.hpp"
#include "des/engine.hpp"
#include "io/output_file.hpp"
#include "runtime/kernels.hpp"
#include "runtime/process.hpp"
#include "runtime/uring.hpp"
#include "sim/simulate.hpp"
#include "state_file.hpp"
#include "tiers.hpp"

namespace ftplan::exec {

using inventory::Category;
using inventory::Element;
using plan::Tier;
using schedule::Op;
using schedule::OpKind;
using schedule::Stream;

namespace {

using decoder::from_bf16;  // bf16 as the GPU stores it
using decoder::to_bf16;

// Where a live tensor is.
struct Storage {
  bool live = false;
  std::byte* ptr = nullptr;  // device or host memory
  std::int64_t nvme = -1;    // offset in the NVMe tier's address space
  std::uint64_t size = 0;    // bytes usable (the IR's, rounded up)
};

// Master weights or moments: chunk c at base + offset[c] of the IR tensor `tensor` (see Runner).
struct Part {
  int tensor = -1;
  std::uint64_t base = 0, per_param = 0;
  std::vector<std::uint64_t> offset;
  std::uint64_t end() const { return offset.empty() ? base : base + offset.back(); }
};

class Runner {
 public:
  Runner(const schedule::StepIR& ir, const plan::Plan& p, Device& device, const Options& o)
      : ir_(ir), plan_(p), device_(device), opt_(o) {}
  ~Runner() {
    if (host_pinned_by_device_) device_.unpin_host(host_->base());
  }

  Measured run();

 private:
  void prepare();
  void step(int s, Measured& out);
  void after_step(int s);
  void record_last_step(Measured& out) const;
  void read_master(Measured& out);
  void execute(std::size_t i, int worker, runtime::DirectIo* io);
  // The pass that leaves a layer's gradient (last_weight_grad_): below, at op i on `worker`.
  void leave_gradient(std::size_t i, int worker);
  void fail(const std::string& why);
  void allocate(int t);
  void release(int t);
  void optimizer(std::size_t i, int chunk);
  void copy(std::size_t i, int worker, runtime::DirectIo* io);
  void swap_in(std::size_t i, std::size_t c, int dst, runtime::DirectIo* io);
  void swap_out(std::size_t i, std::size_t c, std::uint64_t bytes, Scratch& scratch, runtime::DirectIo* io);
  void nvme_io(runtime::DirectIo* io, std::uint64_t offset, std::byte* host, std::uint64_t bytes, bool write);
  // Copies between the device and host memory, counted as they are made (Moved).
  void to_device(std::byte* device, const std::byte* host, std::size_t bytes) const {
    device_.copy_to_device(device, host, bytes);
    moved_[kH2d].fetch_add(bytes, std::memory_order_relaxed);
  }
  void to_host(std::byte* host, const std::byte* device, std::size_t bytes) const {
    device_.copy_to_host(host, device, bytes);
    moved_[kD2h].fetch_add(bytes, std::memory_order_relaxed);
  }
  // What the copies and the NVMe rings moved since the last reset, by where.
  enum Moved { kH2d, kD2h, kNvmeRead, kNvmeWrite, kMoved };
  mutable std::array<std::atomic<std::uint64_t>, kMoved> moved_{};
  bool probe_tier(TierRates& out);
  std::uint64_t nvme_position(const Op& op, int t, std::uint64_t bytes) const;
  void initial_master(float* out, std::size_t begin, std::size_t k);
  std::byte* part_ptr(const Part& part, std::size_t c);
  void part_io(const Part& part, std::size_t c, std::byte* buf, bool write, runtime::DirectIo* io);
  // The gradients of parameters [begin, begin + k) the optimizer step applies, and those held
  // now in their shares' tiers.
  void gradients(std::size_t begin, std::size_t k, float* out) const;
  void live_gradients(std::size_t begin, std::size_t k, float* out) const;
  struct GradientsAt {
    const std::byte* at = nullptr;  // nullptr: gather them (gradients)
    bool bf16 = false;
  };
  GradientsAt gradients_in_place(std::size_t begin, std::size_t k, std::size_t& length) const;
  // Chunk c of a part (per_param x its parameters bytes), from whichever tier holds it.
  void read_part(const Part& part, std::size_t c, std::byte* out);
  // The on-flash state (Options::state_file): what identifies the step IR it belongs to, and
  // its reading and writing.
  std::uint64_t fingerprint() const;
  void load_state();
  void save_state(int steps_done);

  const schedule::StepIR& ir_;
  const plan::Plan& plan_;
  Device& device_;
  const Options& opt_;
  std::unique_ptr<HostTier> host_;
  std::unique_ptr<NvmeTier> nvme_;
  std::unique_ptr<HostTier> tier_probe_;  // probe_tier's buffer (host memory as the run's), kept between steps
  std::vector<Storage> storage_;
  std::vector<std::vector<std::size_t>> stream_ops_;
  std::unique_ptr<std::atomic<int>[]> done_;
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::string problem_;
  std::vector<OpRecord> records_;
  std::chrono::steady_clock::time_point t0_;
  int step_ = 0;
  std::vector<std::string> notes_;
  // Numerics. Trainable parameters P = the optimizer ops' parameters, in chunks (one per
  // optimizer op, in issue order). The fp32 master weights (4 B per parameter) and Adam's moments
  // (m then v, 8 B) are parts of the IR's optimizer tensors, in whatever tier those are: chunk c
  // of a part at base + offset[c] of its tensor (offsets aligned for O_DIRECT).
  Part master_, moments_;
  bool state_ = false;  // master and moments live in the IR's tensors
  std::size_t params_ = 0;
  std::vector<std::size_t> chunk_begin_, chunk_params_;
  std::map<std::size_t, int> chunk_of_op_;  // optimizer, its NVMe swap-in and swap-out copies -> chunk
  std::vector<std::byte*> swap_;            // host swap buffer of each chunk while swapped in
  std::vector<char> swap_owned_;            // the executor allocated it (not the IR's swap buffers)
  int weights_tensor_ = -1;
  std::vector<int> grad_tensor_;                  // per gradient share, in IR order
  std::vector<std::size_t> grad_begin_;           // its first parameter
  std::map<int, int> grad_of_layer_;              // model layer -> index in grad_tensor_
  std::map<std::size_t, int> last_weight_grad_;   // op -> the share whose gradient it leaves
  std::vector<std::vector<float>> device_grads_;  // the compute stream's reduced gradient of each share
  std::vector<float> previous_grads_;             // delayed update: the last step's, kept when freed
  bool have_previous_ = false;
  std::vector<float> master_fallback_;
  std::vector<float> resume_;  // the loaded state, chunk by chunk [master | m | v]; empty: a fresh start
  int first_step_ = 0;
  std::vector<float> gather_;     // the optimizer's gradients of one chunk
  std::vector<Scratch> scratch_;  // per stream worker: a copy's unnamed source, and its unnamed destination
  std::vector<std::vector<std::uint16_t>> bf16_;  // per stream worker: a gradient share in bf16
  mutable std::vector<std::byte> staged_;         // device-resident gradients or state read back (CUDA device)
  bool host_pinned_by_device_ = false;
  Scratch own_scratch_;  // the state's first values and last read-back
  // Real training (Options::train): the decoder's math, and per chunk whether this step wrote its
  // updated 16-bit parameters where the next step reads them.
  std::unique_ptr<Trainer> trainer_;
  // The weights tensors training reads and writes: the base model's bf16 parameters (fetched or
  // read in place), and the trainable ones the optimizer updates: the same tensor in a full
  // fine-tune; LoRA's frozen base and its adapters.
  int base_tensor_ = -1, trainable_tensor_ = -1;
  std::vector<char> params_written_;
  // Training with streamed parameters: the parameter ranges (decoder::Layout) a fetch carries, in
  // its buffer one after the other, per IR tensor (each fetch's staging and GPU buffers, along
  // its copies); and the buffers the compute ops last read, by their first parameter (the compute
  // worker's).
  struct Segment {
    std::int64_t first = 0, count = 0;
  };
  std::vector<std::vector<Segment>> segments_;
  std::map<std::int64_t, int> current_;
  std::vector<Segment> fetch_segments(int layer, const std::string& name) const;
  void nvme_params(int tensor, runtime::DirectIo* io, std::int64_t first, std::int64_t count, std::uint16_t* data,
                   bool write, Scratch& scratch);
  void fill_params16(int tensor, std::int64_t first, std::int64_t count, const float* values);
  runtime::AdamW adamw_;  // its defaults; Training::learning_rate when training
  void prepare_training();
  const std::uint16_t* params16(std::int64_t first, std::int64_t count) const;
  void bf16_of_master(std::size_t c, const float* master, std::uint16_t* out) const;
  void write_params16(std::size_t c, const float* master);
  void publish_gradients(int share);
};

void Runner::fail(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (problem_.empty()) problem_ = why;
  }
  failed_ = true;
  for (std::size_t i = 0; i < ir_.ops.size(); ++i) {
    done_[i].store(1);
    done_[i].notify_all();
  }
}

void Runner::prepare() {
  // CXL memory is a NUMA node of its own on a machine that has it; the executor has no tier for it
  // and would measure host DRAM in its place.
  for (const auto& x : ir_.tensors)
    if (x.tier == Tier::cxl)
      throw UnsupportedError(fmt::format(
          "the plan keeps {} in CXL memory, which the executor does not run (it would measure host DRAM instead)",
          x.name));
  const std::size_t n = ir_.ops.size();
  stream_ops_ = stream_order(ir_);
  done_ = std::make_unique<std::atomic<int>[]>(n);
  storage_.assign(ir_.tensors.size(), Storage{});
  scratch_.resize(2 * schedule::kStreams);
  bf16_.resize(schedule::kStreams);
  // The trainable parameters, chunk by chunk.
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ir_.ops[i];
    if (op.kind != OpKind::optimizer) continue;
    const auto k = static_cast<std::size_t>(std::llround(op.bytes / 28.0));  // AdamW: 28 B per parameter (step_ir.cpp)
    const int c = static_cast<int>(chunk_params_.size());
    chunk_of_op_[i] = c;
    chunk_begin_.push_back(params_);
    chunk_params_.push_back(k);
    params_ += k;
    for (int d : op.deps)  // its NVMe swap-in
      if (ir_.ops[d].kind == OpKind::copy && ir_.ops[d].src == Tier::nvme)
        chunk_of_op_[static_cast<std::size_t>(d)] = c;
    for (std::size_t j = i + 1; j < n; ++j)  // its swap-out
      if (ir_.ops[j].kind == OpKind::copy && ir_.ops[j].dst == Tier::nvme &&
          std::find(ir_.ops[j].deps.begin(), ir_.ops[j].deps.end(), static_cast<int>(i)) != ir_.ops[j].deps.end())
        chunk_of_op_[j] = c;
  }
  swap_.assign(chunk_params_.size(), nullptr);
  swap_owned_.assign(chunk_params_.size(), 0);
  for (std::size_t t = 0; t < ir_.tensors.size(); ++t) {
    const schedule::Tensor& x = ir_.tensors[t];
    if (x.category == Category::weights && weights_tensor_ < 0) weights_tensor_ = static_cast<int>(t);
    if (x.category == Category::gradients && x.layer >= 0) {
      grad_of_layer_[x.layer] = static_cast<int>(grad_tensor_.size());
      grad_begin_.push_back(grad_tensor_.empty() ? 0
                                                 : grad_begin_.back() + static_cast<std::size_t>(
                                                                            ir_.tensors[grad_tensor_.back()].elements));
      grad_tensor_.push_back(static_cast<int>(t));
    }
  }
  // The op that leaves each share's gradient: its layer's upcast for the host's fp32 copy where
  // the IR has one (Builder::offload_gradients; later on the same worker, so the last
  // weight-gradient GEMM's output is still the device's), else its last weight-gradient GEMM
  // of the last micro-batch. The upcast follows the layer's last backward in issue order, so the
  // last of these ops of a layer is the one.
  std::map<int, std::size_t> last_of_layer;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ir_.ops[i];
    if (!grad_of_layer_.count(op.layer)) continue;
    if ((op.kind == OpKind::elementwise && op.upcasts_gradients) ||
        (op.kind == OpKind::gemm && op.pass == schedule::Pass::backward && op.weight_grad &&
         op.micro == ir_.micro_batches - 1))
      last_of_layer[op.layer] = i;
  }
  for (const auto& [layer, i] : last_of_layer) last_weight_grad_[i] = grad_of_layer_.at(layer);
  device_grads_.resize(grad_tensor_.size());
  for (std::size_t g = 0; g < grad_tensor_.size(); ++g)
    device_grads_[g].assign(static_cast<std::size_t>(ir_.tensors[grad_tensor_[g]].elements), 0.0f);
  const std::size_t grads = grad_tensor_.empty() ? 0 : grad_begin_.back() + device_grads_.back().size();
  if (grads != params_)
    notes_.push_back(
        fmt::format("the gradient shares hold {} parameters, the optimizer steps {}; the missing ones get no gradient",
                    grads, params_));
  // The master weights: an optimizer tensor of 4 B per parameter; the moments one of 8 B; or one
  // tensor of 12 B holding both.
  const double P = static_cast<double>(params_);
  for (std::size_t t = 0; t < ir_.tensors.size(); ++t) {
    const schedule::Tensor& x = ir_.tensors[t];
    if (x.category != Category::optimizer || params_ == 0) continue;
    if (std::abs(x.bytes - 4 * P) < 1 && master_.tensor < 0)
      master_.tensor = static_cast<int>(t), master_.per_param = 4;
    else if (std::abs(x.bytes - 8 * P) < 1 && moments_.tensor < 0)
      moments_.tensor = static_cast<int>(t), moments_.per_param = 8;
    else if (std::abs(x.bytes - 12 * P) < 1 && master_.tensor < 0 && moments_.tensor < 0) {
      master_.tensor = moments_.tensor = static_cast<int>(t);
      master_.per_param = 4;
      moments_.per_param = 8;
    }
  }
  for (Part* part : {&master_, &moments_}) {
    part->offset = {0};
    for (const std::size_t k : chunk_params_)
      part->offset.push_back(part->offset.back() + round_up(part->per_param * k));
  }
  if (master_.tensor >= 0 && master_.tensor == moments_.tensor) moments_.base = master_.end();
  state_ = master_.tensor >= 0 && moments_.tensor >= 0;
  if (!state_) {
    notes_.push_back(
        "no optimizer tensors of 4 and 8 (or 12) B per parameter: master weights and moments kept outside the tiers");
    master_fallback_.assign(3 * params_, 0.0f);
    initial_master(master_fallback_.data(), 0, params_);
  }
  // Tiers: the host's and the NVMe files' capacities cover every tensor the IR places there at
  // once (an upper bound of its peak) plus the optimizer's swap buffers.
  double host = 0, nv = 0, swap = 0;
  for (const auto& x : ir_.tensors) {
    if (x.tier == Tier::cpu) host += static_cast<double>(round_up(static_cast<std::uint64_t>(x.bytes)));
    if (x.tier == Tier::nvme)
      nv += static_cast<double>(round_up(static_cast<std::uint64_t>(x.bytes)) + kAlign * chunk_params_.size());
  }
  for (const std::size_t k : chunk_params_) swap += static_cast<double>(round_up(k * 16 + kAlign));
  const double host_bytes = opt_.host_capacity_bytes > 0 ? opt_.host_capacity_bytes : host + swap + (16 << 20);
  host_ = std::make_unique<HostTier>(static_cast<std::uint64_t>(host_bytes), plan_.offload.pinned);
  // Page-locked for the device's copy engines too (cudaHostRegister on the CUDA device).
  if (plan_.offload.pinned) host_pinned_by_device_ = device_.pin_host(host_->base(), host_->bytes());
  if (nv > 0) {
    if (opt_.storage_dirs.empty())
      throw UsageError("the plan keeps tensors on NVMe: give the executor storage directories");
    const double nvme_bytes = opt_.nvme_capacity_bytes > 0 ? opt_.nvme_capacity_bytes : nv + (16 << 20);
    // Files a killed run left (SIGKILL cannot be caught; other signals remove them as they come).
    int stale = 0;
    for (const auto& dir : opt_.storage_dirs) stale += runtime::remove_stale_scratch_files(dir);
    if (stale > 0) notes_.push_back(fmt::format("removed {} scratch file(s) left by killed runs", stale));
    nvme_ = std::make_unique<NvmeTier>(static_cast<std::uint64_t>(nvme_bytes), opt_.storage_dirs, opt_.stripe_bytes);
  }
  if (opt_.train) prepare_training();
}

// Options::train: what the binding needs of the step and the device, or why it cannot train.
void Runner::prepare_training() {
  const auto refuse = [](const std::string& why) { throw UnsupportedError("cannot train for real: " + why); };
  if (!device_.host_addressable() || !device_.computes_on_host())
    refuse("the decoder's math runs on the host's cores (the CPU device), not on " + device_.describe());
  if (plan_.offload.delayed_update)
    refuse("a delayed update trains on parameters one step stale, another algorithm than the in-memory run's");
  if (!state_) refuse("the optimizer's master weights and moments are not tensors of the step");
  const decoder::Layout layout = decoder::layout_of(opt_.train->shape);
  const bool lora = opt_.train->shape.lora_rank > 0;
  const std::int64_t trainable = lora ? layout.adapter_size : layout.base_size;
  // The weights tensors by what they hold (bf16, the base's or the adapters' count).
  for (std::size_t t = 0; t < ir_.tensors.size(); ++t) {
    const schedule::Tensor& x = ir_.tensors[t];
    if (x.category != Category::weights || x.element != Element::bf16) continue;
    if (x.elements == layout.base_size && base_tensor_ < 0) base_tensor_ = static_cast<int>(t);
    if (x.elements == trainable && trainable_tensor_ < 0 && (lora || base_tensor_ == static_cast<int>(t)))
      trainable_tensor_ = static_cast<int>(t);
  }
  if (static_cast<std::int64_t>(params_) != trainable || base_tensor_ < 0 || trainable_tensor_ < 0)
    refuse(
        fmt::format("the optimizer steps {} parameters where the model trains {}, or no bf16 weights tensor "
                    "holds the base's {} parameters{}",
                    params_, trainable, layout.base_size,
                    lora ? fmt::format(" and one the adapters' {}", layout.adapter_size) : ""));
  // No fetch carries LoRA's adapters: DeepSpeed keeps parameters below stage3_param_persistence_
  // threshold on the GPU, as most adapter matrices are, which the inventory does not model.
  if (lora && ir_.tensors[static_cast<std::size_t>(trainable_tensor_)].tier != Tier::gpu)
    refuse("the step keeps LoRA's adapters in " +
           std::string(plan::to_string(ir_.tensors[static_cast<std::size_t>(trainable_tensor_)].tier)) +
           " and fetches them nowhere");
  for (const auto& op : ir_.ops)
    if (op.kind == OpKind::gemm && op.name.empty()) refuse("the step was built without op names");
  std::vector<bool> recomputed(static_cast<std::size_t>(opt_.train->shape.layers), false);
  for (const auto& op : ir_.ops)
    if (op.pass == schedule::Pass::recompute && op.layer >= 0 && op.layer < opt_.train->shape.layers)
      recomputed[static_cast<std::size_t>(op.layer)] = true;
  trainer_ = std::make_unique<Trainer>(*opt_.train, ir_.micro_batches, std::move(recomputed));
  adamw_.lr = static_cast<float>(opt_.train->learning_rate);
  // Fetched parameters (ZeRO-3 offload, ZeRO-Infinity): the ranges each buffer holds, from the
  // fetch's first copy (out of the base's tensor) along the copies after it (staging to device).
  segments_.assign(ir_.tensors.size(), {});
  for (const Op& op : ir_.ops) {
    if (op.kind != OpKind::copy || op.reads.empty() || op.writes.empty()) continue;
    const auto src = static_cast<std::size_t>(op.reads.front()), dst = static_cast<std::size_t>(op.writes.front());
    if (static_cast<int>(src) == base_tensor_)
      segments_[dst] = fetch_segments(op.layer, op.name);
    else if (!segments_[src].empty())
      segments_[dst] = segments_[src];
  }
  params_written_.assign(chunk_params_.size(), 0);
}

// The parameter ranges the fetch copy of layer `layer` named `name` carries (Builder::fetch and
// fetch_root name their copies "... params L3 ...", "... params embedding ...", "... params head
// ..."): a layer's block; the embedding; the final norm and the head (tied: the embedding matrix).
// Empty for what is no parameter fetch.
std::vector<Runner::Segment> Runner::fetch_segments(int layer, const std::string& name) const {
  const decoder::Layout& l = trainer_->layout();
  const decoder::Shape& s = opt_.train->shape;
  const std::int64_t matrix = static_cast<std::int64_t>(s.vocab) * s.hidden;
  if (name.find("params ") == std::string::npos) return {};
  if (layer >= 0)
    return layer < s.layers ? std::vector<Segment>{{l.block(layer), l.block_size}} : std::vector<Segment>{};
  if (name.find("params embedding") != std::string::npos) return {{l.embedding, matrix}};
  if (name.find("params head") != std::string::npos)
    return s.tied_embeddings ? std::vector<Segment>{{l.final_norm, s.hidden}, {l.embedding, matrix}}
                             : std::vector<Segment>{{l.final_norm, s.hidden + matrix}};  // the head follows the norm
  return {};
}

// The 16-bit parameters [first, first + count), where the compute op reads them: the fetched
// buffer the layer's ops read (current_), else the weights tensor on the device.
const std::uint16_t* Runner::params16(std::int64_t first, std::int64_t count) const {
  for (const auto& [key, t] : current_) {
    const Storage& b = storage_[static_cast<std::size_t>(t)];
    if (!b.live) continue;
    std::int64_t at = 0;
    for (const Segment& seg : segments_[static_cast<std::size_t>(t)]) {
      if (first >= seg.first && first + count <= seg.first + seg.count &&
          static_cast<std::int64_t>(b.size) >= 2 * (at + first - seg.first + count))
        return reinterpret_cast<const std::uint16_t*>(b.ptr) + at + (first - seg.first);
      at += seg.count;
    }
  }
  const Storage& w = storage_[static_cast<std::size_t>(base_tensor_)];
  if (ir_.tensors[static_cast<std::size_t>(base_tensor_)].tier != Tier::gpu || !w.live ||
      static_cast<std::int64_t>(w.size) < 2 * (first + count))
    return nullptr;
  return reinterpret_cast<const std::uint16_t*>(w.ptr) + first;
}

// Parameters [first, first + count) of the weights tensor on NVMe, read into or written from
// `data`, through page-aligned I/O (O_DIRECT): a write reads the partial pages at its ends first
// and writes them back whole. Writes run on the one NVMe write worker and after the step's reads,
// so no two touch a page at once.
void Runner::nvme_params(int tensor, runtime::DirectIo* io, std::int64_t first, std::int64_t count, std::uint16_t* data,
                         bool write, Scratch& scratch) {
  const Storage& w = storage_[static_cast<std::size_t>(tensor)];
  const auto begin = static_cast<std::uint64_t>(2 * first), end = static_cast<std::uint64_t>(2 * (first + count));
  const std::uint64_t a = round_down(begin), b = round_up(end);
  FTPLAN_ASSERT(w.live && b <= w.size, "training: the parameters are not on flash");
  const auto base = static_cast<std::uint64_t>(w.nvme);
  std::byte* buf = scratch.get(b - a);
  if (!write) {
    nvme_io(io, base + a, buf, b - a, false);
    std::memcpy(data, buf + (begin - a), end - begin);
    return;
  }
  if (begin != a) nvme_io(io, base + a, buf, kAlign, false);
  const bool one_page_read = begin != a && b - a == kAlign;  // the first page is the last
  if (end != b && !one_page_read) nvme_io(io, base + b - kAlign, buf + (b - a - kAlign), kAlign, false);
  std::memcpy(buf + (begin - a), data, end - begin);
  nvme_io(io, base + a, buf, b - a, true);
}

void Runner::bf16_of_master(std::size_t c, const float* master, std::uint16_t* out) const {
  for (std::size_t j = 0; j < chunk_params_[c]; ++j) out[j] = to_bf16(master[j]);
}

// Chunk c's updated 16-bit parameters into the weights tensor, by the op that runs now (a GPU
// optimizer writes them in place; the copy of the updated parameters carries a CPU optimizer's).
void Runner::write_params16(std::size_t c, const float* master) {
  const Storage& w = storage_[static_cast<std::size_t>(trainable_tensor_)];
  const std::size_t k = chunk_params_[c];
  FTPLAN_ASSERT(w.live && w.size >= 2 * (chunk_begin_[c] + k),
                fmt::format("training: the weights tensor cannot take chunk {}'s parameters", c));
  bf16_of_master(c, master, reinterpret_cast<std::uint16_t*>(w.ptr) + chunk_begin_[c]);
  params_written_[c] = 1;
}

// Parameters [first, first + count) of weights tensor `tensor` set to `values` rounded to bf16,
// in whichever tier it is (its first values, before any op reads it).
void Runner::fill_params16(int tensor, std::int64_t first, std::int64_t count, const float* values) {
  std::vector<std::uint16_t> h(static_cast<std::size_t>(count));
  for (std::int64_t j = 0; j < count; ++j) h[static_cast<std::size_t>(j)] = to_bf16(values[j]);
  const Storage& w = storage_[static_cast<std::size_t>(tensor)];
  if (ir_.tensors[static_cast<std::size_t>(tensor)].tier == Tier::nvme) {
    runtime::DirectIo io(opt_.io_queue_depth);
    nvme_params(tensor, &io, first, count, h.data(), true, own_scratch_);
  } else {
    FTPLAN_ASSERT(w.size >= static_cast<std::uint64_t>(2 * (first + count)),
                  "training: a weights tensor cannot hold its parameters");
    std::memcpy(w.ptr + 2 * first, h.data(), h.size() * 2);
  }
}

void Runner::gradients(std::size_t begin, std::size_t k, float* out) const {
  std::fill(out, out + k, 0.0f);
  if (plan_.offload.delayed_update) {
    if (begin < previous_grads_.size())
      std::copy_n(previous_grads_.begin() + static_cast<std::ptrdiff_t>(begin),
                  std::min(k, previous_grads_.size() - begin), out);
    return;
  }
  live_gradients(begin, k, out);
}

// Where the gradients from `begin` lie when the share holding them is a live buffer the host can
// address (ZeRO-Offload's and ZeRO-Infinity's fp32 gradients in DRAM, the CPU device's bf16
// gradients of a GPU optimizer), with `length` set to how many of the next `k` it holds; else
// nullptr, `length` then the run up to the next share's start (to be gathered). Not with delayed
// update: its gradients are the previous step's copy.
Runner::GradientsAt Runner::gradients_in_place(std::size_t begin, std::size_t k, std::size_t& length) const {
  length = k;
  if (plan_.offload.delayed_update) return {};
  for (std::size_t g = 0; g < grad_tensor_.size(); ++g) {
    const std::size_t first = grad_begin_[g], end = first + device_grads_[g].size();
    if (first > begin) length = std::min(length, first - begin);
    if (begin < first || begin >= end) continue;
    length = std::min(k, end - begin);
    const Storage& s = storage_[static_cast<std::size_t>(grad_tensor_[g])];
    const schedule::Tensor& x = ir_.tensors[static_cast<std::size_t>(grad_tensor_[g])];
    const std::size_t width = x.element == Element::fp32 ? 4 : 2;  // else bf16, as live_gradients reads it
    if (!s.live || x.tier == Tier::nvme || (x.tier == Tier::gpu && !device_.host_addressable()) ||
        s.size < width * (begin + length - first))
      return {};
    return {s.ptr + width * (begin - first), width == 2};
  }
  return {};
}

void Runner::live_gradients(std::size_t begin, std::size_t k, float* out) const {
  // Share by share: the part of [begin, begin + k) each holds, read in its element type.
  for (std::size_t g = 0; g < grad_tensor_.size(); ++g) {
    const std::size_t a = std::max(begin, grad_begin_[g]);
    const std::size_t b = std::min(begin + k, grad_begin_[g] + device_grads_[g].size());
    const Storage& s = storage_[static_cast<std::size_t>(grad_tensor_[g])];
    if (a >= b || !s.live) continue;
    const std::size_t e = a - grad_begin_[g];
    const schedule::Tensor& x = ir_.tensors[static_cast<std::size_t>(grad_tensor_[g])];
    const std::size_t width = x.element == Element::fp32 ? 4 : 2;
    const std::byte* at = s.ptr + e * width;
    if (x.tier == Tier::gpu && !device_.host_addressable()) {  // read back through the device's copy
      staged_.resize((b - a) * width);
      to_host(staged_.data(), at, staged_.size());
      at = staged_.data();
    }
    if (width == 4) {
      std::memcpy(out + (a - begin), at, (b - a) * 4);
    } else {
      const auto* h = reinterpret_cast<const std::uint16_t*>(at);
      for (std::size_t j = 0; j < b - a; ++j) out[a - begin + j] = from_bf16(h[j]);
    }
  }
}

void Runner::allocate(int t) {
  Storage& s = storage_[static_cast<std::size_t>(t)];
  if (s.live) return;  // persistent state from an earlier step
  const schedule::Tensor& x = ir_.tensors[static_cast<std::size_t>(t)];
  auto bytes = static_cast<std::uint64_t>(std::ceil(x.bytes));
  if (state_)
    for (const Part* part : {&master_, &moments_})
      if (part->tensor == t) bytes = std::max<std::uint64_t>(bytes, part->end());
  s.size = round_up(bytes);
  switch (x.tier) {
    case Tier::gpu:
      s.ptr = device_.allocate(static_cast<std::uint64_t>(x.bytes));
      if (!s.ptr) {
        // What is live, by category, largest first (as the simulator says of its own overflow).
        std::map<std::string, double> live;
        for (std::size_t u = 0; u < storage_.size(); ++u)
          if (storage_[u].live && ir_.tensors[u].tier == Tier::gpu)
            live[inventory::to_string(ir_.tensors[u].category)] += ir_.tensors[u].bytes;
        std::vector<std::pair<double, std::string>> by(live.size());
        std::transform(live.begin(), live.end(), by.begin(),
                       [](const auto& kv) { return std::make_pair(kv.second, kv.first); });
        std::sort(by.rbegin(), by.rend());
        std::string parts;
        for (const auto& [bytes, what] : by)
          parts += fmt::format("{}{} {:.2f} MiB", parts.empty() ? "" : ", ", what, bytes / (1 << 20));
        throw SystemError(fmt::format("device memory ({:.2f} MiB) is full: cannot allocate {} ({} bytes); live: {}",
                                      device_.capacity_bytes() / (1 << 20), x.name, x.bytes, parts));
      }
      break;
    case Tier::cpu:
    case Tier::cxl:  // refused by prepare
      s.ptr = host_->allocate(bytes);
      if (!s.ptr) throw SystemError(fmt::format("host tier is full: cannot allocate {} ({} bytes)", x.name, x.bytes));
      break;
    case Tier::nvme:
      s.nvme = nvme_->allocate(s.size);
      if (s.nvme < 0)
        throw SystemError(fmt::format("NVMe files are full: cannot allocate {} ({} bytes)", x.name, x.bytes));
      break;
  }
  s.live = true;
  if (trainer_ && t == trainable_tensor_) {
    // The 16-bit parameters: the master weights' first values (or the loaded state's) rounded, as
    // every update leaves them.
    std::vector<float> master;
    for (std::size_t c = 0; c < chunk_params_.size(); ++c) {
      master.resize(chunk_params_[c]);
      if (resume_.empty())
        trainer_->initial(master.data(), chunk_begin_[c], chunk_params_[c]);
      else
        std::copy_n(resume_.begin() + static_cast<std::ptrdiff_t>(3 * chunk_begin_[c]), chunk_params_[c],
                    master.begin());
      fill_params16(t, static_cast<std::int64_t>(chunk_begin_[c]), static_cast<std::int64_t>(chunk_params_[c]),
                    master.data());
    }
  }
  if (trainer_ && trainer_->lora() && t == base_tensor_) {  // LoRA's frozen base
    std::vector<float> base(static_cast<std::size_t>(trainer_->layout().base_size));
    trainer_->initial_base(base.data());
    fill_params16(t, 0, static_cast<std::int64_t>(base.size()), base.data());
  }
  // The master weights' first values and zero moments (a fresh optimizer), or the loaded state's.
  if (!state_) return;
  for (const Part* part : {&master_, &moments_}) {
    if (part->tensor != t) continue;
    for (std::size_t c = 0; c < chunk_params_.size(); ++c) {
      const std::size_t k = chunk_params_[c];
      const std::uint64_t n = round_up(part->per_param * k);
      std::byte* at = x.tier == Tier::nvme ? nullptr : s.ptr + part->base + part->offset[c];
      std::byte* buf = x.tier == Tier::cpu ? at : own_scratch_.get(n);
      std::memset(buf, 0, n);
      const float* saved = resume_.empty() ? nullptr : resume_.data() + 3 * chunk_begin_[c];
      if (part == &master_ && saved)
        std::memcpy(buf, saved, 4 * k);
      else if (part == &master_)
        initial_master(reinterpret_cast<float*>(buf), chunk_begin_[c], k);
      else if (saved)
        std::memcpy(buf, saved + k, 8 * k);  // m then v, as the part holds them
      if (x.tier == Tier::nvme) {
        runtime::DirectIo io(opt_.io_queue_depth);
        nvme_io(&io, static_cast<std::uint64_t>(s.nvme) + part->base + part->offset[c], buf, n, true);
      } else if (x.tier == Tier::gpu) {
        to_device(at, buf, n);
      }
    }
  }
}

void Runner::read_part(const Part& part, std::size_t c, std::byte* out) {
  const Storage& s = storage_[static_cast<std::size_t>(part.tensor)];
  FTPLAN_ASSERT(s.live, "the optimizer state is not live");
  const std::uint64_t n = part.per_param * chunk_params_[c];
  switch (ir_.tensors[static_cast<std::size_t>(part.tensor)].tier) {
    case Tier::nvme: {
      runtime::DirectIo io(opt_.io_queue_depth);
      std::byte* buf = own_scratch_.get(round_up(n));
      part_io(part, c, buf, false, &io);
      std::memcpy(out, buf, n);
      break;
    }
    case Tier::gpu: to_host(out, part_ptr(part, c), n); break;
    case Tier::cpu:
    case Tier::cxl: std::memcpy(out, part_ptr(part, c), n); break;
  }
}

std::uint64_t Runner::fingerprint() const {
  // What the state's meaning depends on: the ops and tensors of the step (model, plan, scale),
  // the chunks the optimizer steps and whether its update is delayed.
  std::vector<std::uint64_t> words = {ir_.ops.size(), ir_.tensors.size(), static_cast<std::uint64_t>(ir_.micro_batches),
                                      static_cast<std::uint64_t>(plan_.offload.delayed_update)};
  for (const auto& x : ir_.tensors)
    words.insert(words.end(), {static_cast<std::uint64_t>(x.bytes), static_cast<std::uint64_t>(x.tier),
                               static_cast<std::uint64_t>(x.category)});
  for (const auto& op : ir_.ops)
    words.insert(words.end(), {static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.stream),
                               static_cast<std::uint64_t>(op.bytes)});
  words.insert(words.end(), chunk_params_.begin(), chunk_params_.end());
  return fnv1a(words.data(), words.size() * sizeof(std::uint64_t));
}

void Runner::save_state(int steps_done) {
  SavedState state;
  state.kept = have_previous_ ? previous_grads_.size() : 0;
  state.payload.resize(3 * params_ + state.kept);
  float* payload = state.payload.data();
  for (std::size_t c = 0; c < chunk_params_.size(); ++c) {
    const std::size_t k = chunk_params_[c], begin = chunk_begin_[c];
    float* out = payload + 3 * begin;
    if (!state_) {
      std::copy_n(master_fallback_.begin() + static_cast<std::ptrdiff_t>(begin), k, out);
      std::copy_n(master_fallback_.begin() + static_cast<std::ptrdiff_t>(params_ + 2 * begin), 2 * k, out + k);
      continue;
    }
    read_part(master_, c, reinterpret_cast<std::byte*>(out));
    read_part(moments_, c, reinterpret_cast<std::byte*>(out + k));
  }
  std::copy_n(previous_grads_.begin(), state.kept, payload + 3 * params_);
  write_state_file(opt_.state_file, fingerprint(), steps_done, params_, state);
}

void Runner::load_state() {
  std::optional<SavedState> saved = read_state_file(opt_.state_file, fingerprint(), params_);
  if (!saved) return;
  const std::string path = opt_.state_file.string();
  // A finished run (every step done): the same command again runs the steps again from the start
  // (it once stopped with "nothing to resume" and printed no result), and its state replaces this.
  if (saved->steps_done >= std::max(1, opt_.steps)) {
    notes_.push_back(fmt::format("{} holds a finished run ({} steps): started over", path, saved->steps_done));
    return;
  }
  first_step_ = saved->steps_done;
  std::vector<float>& p = saved->payload;
  if (saved->kept > 0) {
    previous_grads_.assign(p.begin() + static_cast<std::ptrdiff_t>(3 * params_), p.end());
    have_previous_ = true;
  }
  p.resize(3 * params_);
  resume_ = std::move(p);
  if (!state_)
    for (std::size_t c = 0; c < chunk_params_.size(); ++c) {
      const std::size_t k = chunk_params_[c], begin = chunk_begin_[c];
      std::copy_n(resume_.begin() + static_cast<std::ptrdiff_t>(3 * begin), k,
                  master_fallback_.begin() + static_cast<std::ptrdiff_t>(begin));
      std::copy_n(resume_.begin() + static_cast<std::ptrdiff_t>(3 * begin + k), 2 * k,
                  master_fallback_.begin() + static_cast<std::ptrdiff_t>(params_ + 2 * begin));
    }
  notes_.push_back(fmt::format("resumed from {} after step {}", path, first_step_));
}

void Runner::initial_master(float* out, std::size_t begin, std::size_t k) {
  if (trainer_) {
    trainer_->initial(out, begin, k);
    return;
  }
  for (std::size_t j = 0; j < k; ++j)
    out[j] = 0.02f * (static_cast<float>(((begin + j) * 7919) % 2001) - 1000.0f) / 1000.0f;
}

std::byte* Runner::part_ptr(const Part& part, std::size_t c) {
  return storage_[static_cast<std::size_t>(part.tensor)].ptr + part.base + part.offset[c];
}

void Runner::part_io(const Part& part, std::size_t c, std::byte* buf, bool write, runtime::DirectIo* io) {
  const Storage& s = storage_[static_cast<std::size_t>(part.tensor)];
  FTPLAN_ASSERT(s.live, "the optimizer state is not live");
  nvme_io(io, static_cast<std::uint64_t>(s.nvme) + part.base + part.offset[c], buf, part.per_param * chunk_params_[c],
          write);
}

void Runner::release(int t) {
  Storage& s = storage_[static_cast<std::size_t>(t)];
  if (!s.live) return;
  // Delayed update: the step after applies these gradients (DeepSpeed keeps them in a second fp32
  // buffer; the IR frees them at the step's end).
  const auto g = std::find(grad_tensor_.begin(), grad_tensor_.end(), t);
  if (plan_.offload.delayed_update && g != grad_tensor_.end()) {
    const std::size_t gi = static_cast<std::size_t>(g - grad_tensor_.begin());
    previous_grads_.resize(std::max(previous_grads_.size(), grad_begin_[gi] + device_grads_[gi].size()));
    live_gradients(grad_begin_[gi], device_grads_[gi].size(), previous_grads_.data() + grad_begin_[gi]);
    if (gi + 1 == grad_tensor_.size()) have_previous_ = true;
  }
  switch (ir_.tensors[static_cast<std::size_t>(t)].tier) {
    case Tier::gpu: device_.release(s.ptr); break;
    case Tier::cpu:
    case Tier::cxl: host_->release(s.ptr); break;
    case Tier::nvme: nvme_->release(s.nvme); break;
  }
  s = Storage{};
}

// TierRates (executor.hpp): the tier's own extents, as the next step will read and write them.
// Between steps no op touches the tier, and the write pass writes back the bytes the read pass
// got, so the training state is unchanged.
bool Runner::probe_tier(TierRates& out) {
  const std::uint64_t bytes = std::min(kTierProbeBytes, round_down(static_cast<std::uint64_t>(nvme_->peak_bytes())));
  if (bytes == 0) return false;
  if (!tier_probe_ || tier_probe_->bytes() < bytes)
    tier_probe_ = std::make_unique<HostTier>(bytes, plan_.offload.pinned);
  runtime::DirectIo io(opt_.io_queue_depth);
  const auto pass_Bps = [&](bool write) {
    const auto requests = nvme_->requests(0, tier_probe_->base(), bytes, write, opt_.io_block_bytes);
    const auto t0 = std::chrono::steady_clock::now();
    io.run(requests);
    return static_cast<double>(bytes) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  out.bytes = static_cast<double>(bytes);
  // One read untimed first: the timed steps read extents read before (by the warm-up step and
  // the probes); the first probe after the warm-up step read 0.5 GB/s where the next four read
  // 5.4-9.7 (hidden 1024, docs/validation.md), as the warm-up step itself took 3x a later one.
  pass_Bps(false);
  out.read_Bps = pass_Bps(false);
  out.write_Bps = pass_Bps(true);
  return true;
}

void Runner::nvme_io(runtime::DirectIo* io, std::uint64_t offset, std::byte* host, std::uint64_t bytes, bool write) {
  const auto requests = nvme_->requests(offset, host, round_up(bytes), write, opt_.io_block_bytes);
  io->run(requests);  // throws on an error or a short transfer: what returns has moved
  std::uint64_t done = 0;
  for (const auto& r : requests) done += r.bytes;
  moved_[write ? kNvmeWrite : kNvmeRead].fetch_add(done, std::memory_order_relaxed);
}

// Where in an NVMe tensor a copy of `bytes` starts: layer l's share of a tensor holding every
// layer (the parameters), else its start; aligned for O_DIRECT.
std::uint64_t Runner::nvme_position(const Op& op, int t, std::uint64_t bytes) const {
  const Storage& s = storage_[static_cast<std::size_t>(t)];
  if (op.layer < 0 || s.size <= round_up(bytes)) return 0;
  const std::uint64_t at = round_down(static_cast<std::uint64_t>(op.layer) * bytes);
  return std::min(at, s.size - round_up(bytes));
}

void Runner::optimizer(std::size_t i, int c) {
  const std::size_t k = chunk_params_[static_cast<std::size_t>(c)], begin = chunk_begin_[static_cast<std::size_t>(c)];
  const auto cc = static_cast<std::size_t>(c);
  float *master = nullptr, *m = nullptr;
  if (!state_) {
    master = master_fallback_.data() + begin;
    m = master_fallback_.data() + params_ + 2 * begin;
  } else if (swap_[cc]) {  // swapped in from NVMe: [master | m v]
    master = reinterpret_cast<float*>(swap_[cc]);
    m = reinterpret_cast<float*>(swap_[cc] + round_up(4 * k));
  } else {
    for (const Part* part : {&master_, &moments_})
      if (!storage_[static_cast<std::size_t>(part->tensor)].live ||
          ir_.tensors[static_cast<std::size_t>(part->tensor)].tier == Tier::nvme)
        FTPLAN_ASSERT(false, fmt::format("{}: the optimizer state is not in memory", ir_.ops[i].name));
    master = reinterpret_cast<float*>(part_ptr(master_, cc));
    m = reinterpret_cast<float*>(part_ptr(moments_, cc));
  }
  if (plan_.offload.delayed_update && !have_previous_) return;  // the first step has no earlier gradients
  // State in device memory the host cannot address (CUDA device): staged through host copies and
  // updated by the same AdamW as everywhere else, so every placement stays bit-equal (its time is
  // not a GPU optimizer kernel's).
  const bool staged = state_ && !swap_[cc] && !device_.host_addressable() &&
                      ir_.tensors[static_cast<std::size_t>(master_.tensor)].tier == Tier::gpu;
  std::vector<float> stage;
  float* const master_at = master;
  float* const m_at = m;
  if (staged) {
    stage.resize(3 * k);
    to_host(reinterpret_cast<std::byte*>(stage.data()), reinterpret_cast<std::byte*>(master_at), 4 * k);
    to_host(reinterpret_cast<std::byte*>(stage.data() + k), reinterpret_cast<std::byte*>(m_at), 8 * k);
    master = stage.data();
    m = stage.data() + k;
  }
  float* v = m + k;
  // The chunk's gradients read where they lie, as DeepSpeed's cpu_adam reads the fp32 gradients
  // in place (csrc/adam/cpu_adam_impl.cpp, Step_AVX) and a GPU's fused Adam its bf16 ones: AdamW's
  // 28 B per parameter (26 with bf16 gradients, widened a block at a time in L1) and no more, what
  // the simulator charges. Else
  // gathered into one buffer (delayed update's copy, shares the host cannot address), kept between
  // steps (fresh pages would cost a page fault each, more than the update itself): zero fill and
  // copy add 12 B per parameter, which made the executor's host cpu stream 1.5x the simulated one
  // (docs/validation.md). AdamW is elementwise: updating the chunk share by share, widening bf16
  // as it is read, gives the same bits.
  for (std::size_t done = 0, n = 0; done < k; done += n) {
    const GradientsAt g = gradients_in_place(begin + done, k - done, n);
    if (g.at && g.bf16) {
      // Widened a block at a time into a buffer that stays in L1 (16 KiB), then the same AdamW.
      constexpr std::size_t kBlock = 4096;
      std::array<float, kBlock> wide;
      const auto* h = reinterpret_cast<const std::uint16_t*>(g.at);
      for (std::size_t b = 0; b < n; b += kBlock) {
        const std::size_t len = std::min(kBlock, n - b);
        for (std::size_t j = 0; j < len; ++j) wide[j] = from_bf16(h[b + j]);
        runtime::adamw_step(master + done + b, wide.data(), m + done + b, v + done + b, len, adamw_, step_ + 1);
      }
      continue;
    }
    const float* grads = reinterpret_cast<const float*>(g.at);
    if (!grads) {
      if (gather_.size() < n) gather_.resize(n);
      gradients(begin + done, n, gather_.data());
      grads = gather_.data();
    }
    runtime::adamw_step(master + done, grads, m + done, v + done, n, adamw_, step_ + 1);
  }
  if (staged) {
    to_device(reinterpret_cast<std::byte*>(master_at), reinterpret_cast<std::byte*>(master), 4 * k);
    to_device(reinterpret_cast<std::byte*>(m_at), reinterpret_cast<std::byte*>(m), 8 * k);
  }
  // A GPU optimizer (torch's fused AdamW, Megatron's) writes the 16-bit parameters as it updates.
  // A CPU optimizer over parameters kept in host memory (ZeRO-3's offload_param to the CPU)
  // writes them there as it updates (DeepSpeed's cpu_adam with its fp16 parameter output).
  if (trainer_ && (ir_.ops[i].stream == Stream::compute ||
                   plan::host_memory(ir_.tensors[static_cast<std::size_t>(trainable_tensor_)].tier)))
    write_params16(cc, master);
}

// The optimizer's swap-in of chunk c (op i): its master, m and v from NVMe into a host swap
// buffer [master | m v]: a slot of the IR's swap buffers (tensor dst) when they hold every chunk
// the IR may have in flight at once (plan::optimizer_swaps_in_flight;
// schedule::Builder::swapped_optimizer_step waits for chunk c - slots's swap-out before chunk c's
// read, so chunk c takes slot c mod slots); else a buffer of the executor's own.
void Runner::swap_in(std::size_t i, std::size_t c, int dst, runtime::DirectIo* io) {
  const Op& op = ir_.ops[i];
  const std::uint64_t k = chunk_params_[c];
  const auto live = [&](int t) { return t >= 0 && storage_[static_cast<std::size_t>(t)].live; };
  std::uint64_t slot = 0;
  for (const std::size_t kk : chunk_params_) slot = std::max(slot, round_up(4 * kk) + round_up(8 * kk));
  const std::size_t slots = std::min<std::size_t>(
      chunk_params_.size(), static_cast<std::size_t>(plan::optimizer_swaps_in_flight(plan_.offload)));
  if (live(dst) && storage_[static_cast<std::size_t>(dst)].size >= slot * slots) {
    swap_[c] = storage_[static_cast<std::size_t>(dst)].ptr + slot * (c % slots);
    swap_owned_[c] = false;
  } else {
    swap_[c] = host_->allocate(round_up(4 * k) + round_up(8 * k));
    swap_owned_[c] = true;
    if (!swap_[c]) throw SystemError(fmt::format("{}: host tier full for the swap buffer", op.name));
    if (c == 0 && step_ == 0) {
      std::lock_guard lock(mutex_);
      notes_.push_back(
          fmt::format("the optimizer's NVMe swap reads {} chunks ahead of their updates, more than the IR's swap "
                      "buffers hold; "
                      "the executor holds each chunk's master weights and moments in a buffer of its own ({:.1f} "
                      "MiB for chunk "
                      "0), which the simulated host peak misses",
                      chunk_params_.size(), static_cast<double>(round_up(4 * k) + round_up(8 * k)) / (1 << 20)));
    }
  }
  part_io(master_, c, swap_[c], false, io);
  part_io(moments_, c, swap_[c] + round_up(4 * k), false, io);
}

// The optimizer's write-back of chunk c (op i): master, m and v, then the chunk's 16-bit
// parameters (the rest of the op's bytes), and the swap buffer freed.
void Runner::swap_out(std::size_t i, std::size_t c, std::uint64_t bytes, Scratch& scratch, runtime::DirectIo* io) {
  const Op& op = ir_.ops[i];
  const std::uint64_t k = chunk_params_[c], state_bytes = 12 * k;
  const auto live = [&](int t) { return t >= 0 && storage_[static_cast<std::size_t>(t)].live; };
  FTPLAN_ASSERT(swap_[c], fmt::format("{}: nothing swapped in", op.name));
  part_io(master_, c, swap_[c], true, io);
  part_io(moments_, c, swap_[c] + round_up(4 * k), true, io);
  if (trainer_ && bytes > state_bytes && live(trainable_tensor_) &&
      ir_.tensors[static_cast<std::size_t>(trainable_tensor_)].tier == Tier::nvme) {
    // Training: the chunk's updated 16-bit parameters where the next step's fetches read them.
    std::vector<std::uint16_t> h(k);
    bf16_of_master(c, reinterpret_cast<const float*>(swap_[c]), h.data());
    nvme_params(trainable_tensor_, io, static_cast<std::int64_t>(chunk_begin_[c]), static_cast<std::int64_t>(k),
                h.data(), true, scratch);
    params_written_[c] = 1;
  } else if (bytes > state_bytes && live(weights_tensor_) &&
             ir_.tensors[static_cast<std::size_t>(weights_tensor_)].tier == Tier::nvme) {
    const std::uint64_t rest = bytes - state_bytes;
    const Storage& w = storage_[static_cast<std::size_t>(weights_tensor_)];
    const std::uint64_t at = std::min(round_down(chunk_begin_[c] * (rest / std::max<std::size_t>(1, chunk_params_[c]))),
                                      w.size > round_up(rest) ? w.size - round_up(rest) : 0);
    nvme_io(io, static_cast<std::uint64_t>(w.nvme) + at, scratch.get(rest), rest, true);
  }
  if (swap_owned_[c]) host_->release(swap_[c]);
  swap_[c] = nullptr;
}

void Runner::copy(std::size_t i, int worker, runtime::DirectIo* io) {
  const Op& op = ir_.ops[i];
  const auto bytes = static_cast<std::uint64_t>(std::ceil(op.bytes));
  const int src = op.reads.empty() ? -1 : op.reads.front();
  const int dst = op.writes.empty() ? -1 : op.writes.front();
  Scratch& scratch = scratch_[static_cast<std::size_t>(worker)];
  const auto live = [&](int t) { return t >= 0 && storage_[static_cast<std::size_t>(t)].live; };
  const auto chunk = chunk_of_op_.find(i);
  // NVMe <-> host.
  if (op.src == Tier::nvme || op.dst == Tier::nvme) {
    if (!io)
      FTPLAN_ASSERT(false, fmt::format("{}: an NVMe copy on stream {}", op.name, schedule::to_string(op.stream)));
    const bool write = op.dst == Tier::nvme;
    const bool swapped = state_ && ir_.tensors[static_cast<std::size_t>(master_.tensor)].tier == Tier::nvme &&
                         ir_.tensors[static_cast<std::size_t>(moments_.tensor)].tier == Tier::nvme;
    if (chunk != chunk_of_op_.end() && swapped) {
      // The optimizer's swap of chunk c: its master, m and v (12 B per parameter) through a host
      // swap buffer [master | m v] (the IR names none; see notes); the write-back also writes the
      // chunk's 16-bit parameters (the rest of its bytes).
      const auto c = static_cast<std::size_t>(chunk->second);
      if (write)
        swap_out(i, c, bytes, scratch, io);
      else
        swap_in(i, c, dst, io);
      return;
    }
    const int nv = write ? dst : src, hb = write ? src : dst;
    // Training: a fetch reads the ranges its buffer carries, one after the other (segments_).
    if (trainer_ && !write && src == base_tensor_ && live(hb)) {
      std::int64_t at = 0;
      for (const Segment& seg : segments_[static_cast<std::size_t>(hb)]) {
        FTPLAN_ASSERT(storage_[static_cast<std::size_t>(hb)].size >= static_cast<std::uint64_t>(2 * (at + seg.count)),
                      fmt::format("{}: the staging buffer cannot hold the parameters", op.name));
        nvme_params(base_tensor_, io, seg.first, seg.count,
                    reinterpret_cast<std::uint16_t*>(storage_[static_cast<std::size_t>(hb)].ptr) + at, false, scratch);
        at += seg.count;
      }
      return;
    }
    std::byte* host = live(hb) ? storage_[static_cast<std::size_t>(hb)].ptr : scratch.get(bytes);
    if (live(hb) && storage_[static_cast<std::size_t>(hb)].size < round_up(bytes)) host = scratch.get(bytes);
    std::uint64_t offset = 0;
    if (live(nv)) {
      offset = static_cast<std::uint64_t>(storage_[static_cast<std::size_t>(nv)].nvme) + nvme_position(op, nv, bytes);
    } else {
      FTPLAN_ASSERT(false, fmt::format("{}: names no live NVMe tensor", op.name));
    }
    nvme_io(io, offset, host, bytes, write);
    return;
  }
  // Options::train: the copy of a CPU optimizer's updated 16-bit parameters to the device's
  // weights (ZeRO-Offload): those of the chunks it follows (all where it follows none), rounded
  // from the master weights.
  if (trainer_ && dst == trainable_tensor_ && op.dst == Tier::gpu && !live(src)) {
    std::vector<std::size_t> chunks;
    for (const int d : op.deps)
      if (ir_.ops[static_cast<std::size_t>(d)].kind == OpKind::optimizer)
        chunks.push_back(static_cast<std::size_t>(chunk_of_op_.at(static_cast<std::size_t>(d))));
    if (chunks.empty())
      for (std::size_t c = 0; c < chunk_params_.size(); ++c) chunks.push_back(c);
    const Storage& w = storage_[static_cast<std::size_t>(trainable_tensor_)];
    for (const std::size_t c : chunks) {
      const std::size_t k = chunk_params_[c];
      std::vector<float> master(k);
      read_part(master_, c, reinterpret_cast<std::byte*>(master.data()));
      auto* h = reinterpret_cast<std::uint16_t*>(scratch.get(2 * k));
      bf16_of_master(c, master.data(), h);
      FTPLAN_ASSERT(w.size >= 2 * (chunk_begin_[c] + k),
                    fmt::format("{}: the weights tensor cannot take chunk {}'s parameters", op.name, c));
      to_device(w.ptr + 2 * chunk_begin_[c], reinterpret_cast<const std::byte*>(h), 2 * k);
      params_written_[c] = 1;
    }
    return;
  }
  // Training: a fetch from parameters kept in host memory copies the ranges its buffer carries.
  if (trainer_ && src == base_tensor_ && op.dst == Tier::gpu && live(src) && live(dst)) {
    std::int64_t at = 0;
    const Storage &w = storage_[static_cast<std::size_t>(src)], &b = storage_[static_cast<std::size_t>(dst)];
    for (const Segment& seg : segments_[static_cast<std::size_t>(dst)]) {
      FTPLAN_ASSERT(b.size >= static_cast<std::uint64_t>(2 * (at + seg.count)) &&
                        w.size >= static_cast<std::uint64_t>(2 * (seg.first + seg.count)),
                    fmt::format("{}: the buffer cannot hold the parameters", op.name));
      to_device(b.ptr + 2 * at, w.ptr + 2 * seg.first, static_cast<std::size_t>(2 * seg.count));
      at += seg.count;
    }
    return;
  }
  // Device <-> host. A gradient's device-to-host copy: the compute stream's reduced gradient of
  // its layer, upcast to fp32 (ZeRO-Offload keeps fp32 gradients on the host, Ren et al. 2021 sec. 4.1).
  if (op.src == Tier::gpu && src < 0 && dst >= 0 &&
      ir_.tensors[static_cast<std::size_t>(dst)].element == Element::fp32) {
    const auto it = grad_of_layer_.find(op.layer);
    if (it != grad_of_layer_.end() && live(dst)) {
      const std::vector<float>& g = device_grads_[static_cast<std::size_t>(it->second)];
      const std::size_t n = std::min<std::size_t>(g.size() * 4, storage_[static_cast<std::size_t>(dst)].size);
      to_host(storage_[static_cast<std::size_t>(dst)].ptr, reinterpret_cast<const std::byte*>(g.data()), n);
      return;
    }
  }
  std::byte* from = live(src) && storage_[static_cast<std::size_t>(src)].size >= bytes
                        ? storage_[static_cast<std::size_t>(src)].ptr
                        : scratch.get(bytes);
  std::byte* to = live(dst) && storage_[static_cast<std::size_t>(dst)].size >= bytes
                      ? storage_[static_cast<std::size_t>(dst)].ptr
                      : scratch_[static_cast<std::size_t>(worker) + schedule::kStreams].get(bytes);
  if (op.dst == Tier::gpu)
    to_device(to, from, bytes);
  else
    to_host(to, from, bytes);
}

// The layer's gradient: the last weight-gradient GEMM's output (still the worker's) reduced
// deterministically (element j of the step's gradients takes dB[j mod |dB|]), rounded to bf16 as the GPU
// produces it, in one pass that also stores it in a share kept on the device. Where the IR
// upcasts the gradient for the host's fp32 copy, the upcast op runs it (a GPU's kernel reads the
// 16-bit gradient and writes fp32: here 4 B read and 4 written per element); else the layer's
// last weight-gradient GEMM of the last micro-batch does (the executor's own cost, about a
// nanosecond per parameter: on a GPU the GEMM's epilogue writes dB).
void Runner::leave_gradient(std::size_t i, int worker) {
  const int share = last_weight_grad_.at(i);
  if (trainer_) {
    publish_gradients(share);
    return;
  }
  std::int64_t e = 0;
  const float* dB = device_.weight_gradient(worker, e);
  std::vector<float>& out = device_grads_[static_cast<std::size_t>(share)];
  const Storage& st = storage_[static_cast<std::size_t>(grad_tensor_[static_cast<std::size_t>(share)])];
  const schedule::Tensor& x = ir_.tensors[static_cast<std::size_t>(grad_tensor_[static_cast<std::size_t>(share)])];
  const bool keep = st.live && x.tier == Tier::gpu && x.element != Element::fp32 && st.size >= out.size() * 2;
  const float scale = 1.0f / static_cast<float>(1 + step_);
  // Element j of the step's gradients takes dB[j mod |dB|] (every layer's last weight-gradient
  // GEMM has one shape and operands, so the gradients do not depend on where the shares split).
  // A running index, not a division per element (this pass is on the step's critical path).
  const auto period = static_cast<std::size_t>(std::max<std::int64_t>(e, 1));
  std::size_t next = grad_begin_[static_cast<std::size_t>(share)] % period;
  const auto at = [&] {
    const float g = dB[next] * scale;
    if (++next == period) next = 0;
    return g;
  };
  if (!keep) {
    for (std::size_t j = 0; dB && e > 0 && j < out.size(); ++j) out[j] = from_bf16(to_bf16(at()));
    return;
  }
  // The kept share written in place where the host can address it (a GPU's epilogue writes dB
  // into the gradient buffer; a staging copy is 4 B per parameter more on the compute stream);
  // else staged and copied.
  const bool in_place = dB && e > 0 && device_.host_addressable();
  std::vector<std::uint16_t>& staged = bf16_[static_cast<std::size_t>(worker)];
  if (!in_place) staged.resize(out.size());
  std::uint16_t* const bf16 = in_place ? reinterpret_cast<std::uint16_t*>(st.ptr) : staged.data();
  for (std::size_t j = 0; dB && e > 0 && j < out.size(); ++j) {
    bf16[j] = to_bf16(at());
    out[j] = from_bf16(bf16[j]);
  }
  if (!in_place) to_device(st.ptr, reinterpret_cast<const std::byte*>(staged.data()), out.size() * 2);
}

// Options::train: share g's gradients, the decoder's fp32 sums rounded to bf16 as the GPU's
// backward leaves them, into the share kept on the device (in place) and the compute stream's copy
// the device-to-host copy carries (upcast, as DeepSpeed's). Shares kept on the device are parts of
// one buffer the optimizer reads after the backward, equal parts that need not follow the layers
// (Builder::gradient_state): so when the last share is left (the first layer's), every kept share
// is written again with what the layers below made since.
void Runner::publish_gradients(int share) {
  const std::vector<float>& g = trainer_->gradients();
  const auto publish = [&](std::size_t gi) {
    std::vector<float>& out = device_grads_[gi];
    const Storage& st = storage_[static_cast<std::size_t>(grad_tensor_[gi])];
    const schedule::Tensor& x = ir_.tensors[static_cast<std::size_t>(grad_tensor_[gi])];
    const bool keep = st.live && x.tier == Tier::gpu && x.element != Element::fp32 && st.size >= out.size() * 2;
    auto* bf16 = keep ? reinterpret_cast<std::uint16_t*>(st.ptr) : nullptr;
    const float* from = g.data() + grad_begin_[gi];
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::uint16_t h = to_bf16(from[j]);
      out[j] = from_bf16(h);
      if (bf16) bf16[j] = h;
    }
    return keep;
  };
  const bool kept = publish(static_cast<std::size_t>(share));
  if (kept && share == 0)
    for (std::size_t gi = 1; gi < grad_tensor_.size(); ++gi)
      if (storage_[static_cast<std::size_t>(grad_tensor_[gi])].live) publish(gi);
}

void Runner::execute(std::size_t i, int worker, runtime::DirectIo* io) {
  const Op& op = ir_.ops[i];
  if (trainer_ && trainer_->runs(op)) {
    for (const int t : op.reads)  // the fetched buffers this op reads (the layer's later ops read them too)
      if (!segments_[static_cast<std::size_t>(t)].empty())
        current_[segments_[static_cast<std::size_t>(t)].front().first] = t;
    const bool backward_done = trainer_->run(
        op, step_, [this](std::int64_t first, std::int64_t count) { return params16(first, count); },
        [this](std::int64_t first, std::int64_t count) -> const std::uint16_t* {  // LoRA's, on the device
          const Storage& a = storage_[static_cast<std::size_t>(trainable_tensor_)];
          if (!a.live || static_cast<std::int64_t>(a.size) < 2 * (first + count)) return nullptr;
          return reinterpret_cast<const std::uint16_t*>(a.ptr) + first;
        });
    // The layer's gradients are complete once its last micro-batch's backward has run: its share
    // is written then (before the ops after it, the share's copy to the host among them).
    if (backward_done && op.micro == ir_.micro_batches - 1 && grad_of_layer_.count(op.layer))
      publish_gradients(grad_of_layer_.at(op.layer));
    return;
  }
  switch (op.kind) {
    case OpKind::alloc: allocate(op.tensor); break;
    case OpKind::free: release(op.tensor); break;
    case OpKind::marker: break;
    case OpKind::collective:
      if (op.group_size > 1)
        throw UnsupportedError(fmt::format("{}: a collective over {} ranks", op.name, op.group_size));
      break;
    case OpKind::gemm: {
      GemmCall g{op.m, op.n, op.k, op.pass == schedule::Pass::backward, op.weight_grad, 1};
      const double per = 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k) *
                         (g.backward && g.weight_grad ? 2.0 : 1.0);
      if (per <= 0 || op.flops <= 0) break;
      g.repeats = std::max(1, static_cast<int>(std::lround(op.flops / per)));
      device_.gemm(worker, g);
      if (last_weight_grad_.count(i)) leave_gradient(i, worker);
      break;
    }
    case OpKind::attention: {
      const AttentionCall a = attention_call(op);
      if (a.repeats > 0) device_.attention(worker, a.m, a.n, a.k, a.repeats);
      break;
    }
    case OpKind::elementwise:
      // The gradient upcast is the pass that leaves the layer's gradient (leave_gradient).
      if (last_weight_grad_.count(i)) {
        leave_gradient(i, worker);
        break;
      }
      device_.memory_bound(worker, op.bytes);
      break;
    case OpKind::loss: device_.memory_bound(worker, op.bytes); break;
    case OpKind::optimizer: optimizer(i, chunk_of_op_.at(i)); break;
    case OpKind::copy: copy(i, worker, io); break;
  }
}

void Runner::step(int s, Measured& out) {
  step_ = s;
  const std::size_t n = ir_.ops.size();
  for (std::size_t i = 0; i < n; ++i) done_[i].store(0);
  records_.assign(n, OpRecord{});
  t0_ = std::chrono::steady_clock::now();
  const auto now_ns = [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  };
  std::vector<std::thread> workers;
  // Options::pin_compute: the compute worker on the first allowed core, the others on the rest.
  const CorePlan cores = core_plan(device_, opt_.pin_compute);
  const bool pin = !cores.compute.empty();
  const std::vector<int>& compute_core = cores.compute;
  const std::vector<int>& other_cores = cores.others;
  if (pin && s == first_step_)
    notes_.push_back(
        fmt::format("the compute stream's worker ran alone on core {}, the copy, NVMe and optimizer "
                    "workers on the other {} (Options::pin_compute)",
                    compute_core.front(), other_cores.size()));
  for (int st = 0; st < schedule::kStreams; ++st) {
    if (stream_ops_[static_cast<std::size_t>(st)].empty()) continue;
    workers.emplace_back([&, st] {
      std::unique_ptr<runtime::DirectIo> io;
      const auto stream = static_cast<Stream>(st);
      if (pin && !runtime::pin_to(stream == Stream::compute ? compute_core : other_cores) && s == first_step_) {
        std::lock_guard lock(mutex_);
        notes_.push_back(fmt::format("could not pin the {} stream's worker to its cores", schedule::to_string(stream)));
      }
      try {
        if (stream == Stream::nvme_read || stream == Stream::nvme_write)
          if (nvme_) io = std::make_unique<runtime::DirectIo>(opt_.io_queue_depth);
        for (const std::size_t i : stream_ops_[static_cast<std::size_t>(st)]) {
          for (const int d : ir_.ops[i].deps) done_[static_cast<std::size_t>(d)].wait(0);
          if (failed_) return;
          records_[i].op = static_cast<int>(i);
          records_[i].start_ns = now_ns();
          const std::int64_t cpu0 = runtime::thread_cpu_ns();  // read inside the op's wall interval
          execute(i, st, io.get());
          records_[i].cpu_ns = runtime::thread_cpu_ns() - cpu0;
          records_[i].end_ns = now_ns();
          records_[i].core = sched_getcpu();
          done_[i].store(1);
          done_[i].notify_all();
        }
      } catch (const std::exception& e) {
        fail(e.what());
      }
    });
  }
  for (auto& w : workers) w.join();
  double end = 0;
  for (const auto& r : records_) end = std::max(end, static_cast<double>(r.end_ns) * 1e-9);
  out.step_s.push_back(end);
}

// The union of intervals, seconds.
double covered_s(std::vector<std::pair<std::int64_t, std::int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0;
  std::int64_t a = 0, b = -1;
  for (const auto& [s, e] : spans) {
    if (s > b) {
      if (b > a) total += static_cast<double>(b - a);
      a = s;
      b = e;
    } else {
      b = std::max(b, e);
    }
  }
  if (b > a) total += static_cast<double>(b - a);
  return total * 1e-9;
}

// After step s (0-based) of a run that has not failed: the state written when the run keeps one
// (kill and resume), then the caller's after_step, with the NVMe tier's own rates (probe_tier).
void Runner::after_step(int s) {
  if (!opt_.state_file.empty()) {
    try {
      save_state(s + 1);
    } catch (const std::exception& e) {
      fail(fmt::format("writing the state after step {}: {}", s + 1, e.what()));
      return;
    }
    if (opt_.on_state_written) opt_.on_state_written(s + 1);
  }
  if (opt_.after_step) {
    TierRates tier;
    const bool probed = opt_.probe_tier && nvme_ && probe_tier(tier);
    opt_.after_step(s + 1, probed ? &tier : nullptr);
  }
}

// The last step's ops, per stream busy and CPU time, per link bytes and busy time, the tiers'
// peaks and (with opt_.trace) its Chrome trace.
void Runner::record_last_step(Measured& out) const {
  std::vector<des::TraceTrack> queues(schedule::kStreams);
  std::map<std::string, std::pair<double, std::vector<std::pair<std::int64_t, std::int64_t>>>> links;
  std::map<std::string, des::TraceTrack> link_tracks;
  for (std::size_t i = 0; i < ir_.ops.size(); ++i) {
    const Op& op = ir_.ops[i];
    const OpRecord& r = records_[i];
    out.ops.push_back(r);
    auto& q = queues[static_cast<std::size_t>(op.stream)];
    q.name = schedule::to_string(op.stream);
    if (opt_.trace && op.kind != OpKind::alloc && op.kind != OpKind::free)
      q.spans.push_back({op.name.empty() ? schedule::to_string(op.kind) : op.name, schedule::to_string(op.kind),
                         r.start_ns, r.end_ns, op.kind == OpKind::copy ? op.bytes : 0.0, r.cpu_ns});
    for (const sim::HostLink h : sim::host_path(op, plan_)) {
      auto& l = links[sim::to_string(h)];
      l.first += op.bytes;
      l.second.emplace_back(r.start_ns, r.end_ns);
      if (opt_.trace) {
        link_tracks[sim::to_string(h)].name = sim::to_string(h);
        link_tracks[sim::to_string(h)].spans.push_back(
            {op.name, schedule::to_string(op.kind), r.start_ns, r.end_ns, op.bytes});
      }
    }
    if (op.kind == OpKind::copy && op.dst == Tier::nvme) out.nvme_written_bytes += op.bytes;
  }
  for (int st = 0; st < schedule::kStreams; ++st) {
    double busy = 0, cpu = 0;
    for (const std::size_t i : stream_ops_[static_cast<std::size_t>(st)]) {
      busy += static_cast<double>(records_[i].end_ns - records_[i].start_ns) * 1e-9;
      cpu += static_cast<double>(records_[i].cpu_ns) * 1e-9;
    }
    if (!stream_ops_[static_cast<std::size_t>(st)].empty())
      out.streams.push_back({schedule::to_string(static_cast<Stream>(st)), busy, cpu});
  }
  for (auto& [name, l] : links) out.links.push_back({name, l.first, covered_s(l.second)});
  out.device_peak_bytes = device_.peak_bytes();
  out.host_peak_bytes = host_->peak_bytes();
  out.nvme_peak_bytes = nvme_ ? nvme_->peak_bytes() : 0;
  if (opt_.trace) {
    std::vector<des::TraceTrack> used, link_list;
    for (auto& q : queues)
      if (!q.name.empty()) used.push_back(std::move(q));
    for (auto& [name, t] : link_tracks) link_list.push_back(std::move(t));
    out.trace_json = des::chrome_trace(used, link_list);
  }
}

// The master weights after the last step.
void Runner::read_master(Measured& out) {
  out.master.resize(params_);
  for (std::size_t c = 0; c < chunk_params_.size(); ++c) {
    const std::size_t k = chunk_params_[c];
    if (!state_) {
      std::copy_n(master_fallback_.begin() + static_cast<std::ptrdiff_t>(chunk_begin_[c]), k,
                  out.master.begin() + static_cast<std::ptrdiff_t>(chunk_begin_[c]));
      continue;
    }
    if (!storage_[static_cast<std::size_t>(master_.tensor)].live) continue;
    read_part(master_, c, reinterpret_cast<std::byte*>(out.master.data() + chunk_begin_[c]));
  }
}

Measured Runner::run() {
  Measured out;
  std::string why = unsupported(ir_);
  if (why.empty()) why = schedulable(ir_);
  if (!why.empty()) {
    out.ok = false;
    out.problem = why;
    return out;
  }
  try {
    prepare();
    if (!opt_.state_file.empty()) load_state();
  } catch (const std::exception& e) {
    out.ok = false;
    out.problem = e.what();
    return out;
  }
  out.host_pinned = host_->locked();
  out.host_note = host_->note();
  out.first_step = first_step_;
  const bool rss = runtime::reset_peak_rss();
  for (int s = first_step_; s < std::max(1, opt_.steps) && !failed_; ++s) {
    if (opt_.progress) opt_.progress(fmt::format("step {} of {}", s + 1, std::max(1, opt_.steps)));
    for (auto& m : moved_) m.store(0);
    if (trainer_) {
      trainer_->begin_step();
      current_.clear();
    }
    const runtime::BlockIo before = runtime::block_io();
    step(s, out);
    if (trainer_ && !failed_) {
      for (std::size_t c = 0; c < params_written_.size(); ++c)
        if (!params_written_[c])
          fail(
              fmt::format("training: step {} left chunk {}'s updated parameters where the next step does not read "
                          "them",
                          s + 1, c));
      std::fill(params_written_.begin(), params_written_.end(), 0);
      out.losses.push_back(trainer_->step_loss());
    }
    // The last step's counts (each step overwrites the one before).
    const runtime::BlockIo after = runtime::block_io();
    out.counted = {static_cast<double>(moved_[kH2d].load()),
                   static_cast<double>(moved_[kD2h].load()),
                   static_cast<double>(moved_[kNvmeRead].load()),
                   static_cast<double>(moved_[kNvmeWrite].load()),
                   before.ok && after.ok ? after.read - before.read : -1.0,
                   before.ok && after.ok ? after.write - before.write : -1.0};
    if (!failed_) after_step(s);
  }
  if (failed_) {
    out.ok = false;
    out.problem = problem_;
    return out;
  }
  std::vector<double> later(out.step_s.size() > 1 ? out.step_s.begin() + 1 : out.step_s.begin(), out.step_s.end());
  std::sort(later.begin(), later.end());
  out.step_time_s = later.empty() ? 0 : later[later.size() / 2];
  record_last_step(out);
  out.process_peak_rss_bytes = rss ? runtime::peak_rss_bytes() : -1;
  out.device_scratch_bytes = device_.scratch_bytes();
  read_master(out);
  if (trainer_) {
    const Storage& w = storage_[static_cast<std::size_t>(trainable_tensor_)];
    out.weights16.resize(params_);
    if (ir_.tensors[static_cast<std::size_t>(trainable_tensor_)].tier == Tier::nvme) {
      runtime::DirectIo io(opt_.io_queue_depth);
      nvme_params(trainable_tensor_, &io, 0, static_cast<std::int64_t>(params_), out.weights16.data(), false,
                  own_scratch_);
    } else if (w.live) {
      std::memcpy(out.weights16.data(), w.ptr, 2 * params_);
    }
  }
  out.notes = notes_;
  return out;
}

}  // namespace

Measured run(const schedule::StepIR& ir, const plan::Plan& plan, Device& device, const Options& options) {
  Runner r(ir, plan, device, options);
  return r.run();
}

}  // namespace ftplan::exec
