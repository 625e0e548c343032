// Consistency checks of a plan against its model and hardware: parallel degrees that divide,
// batches that split, features the GPU lacks. Pure functions; the scenario reader attaches
// each finding to the place in the file it concerns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "plan/plan.hpp"

namespace ftplan::plan {

struct Finding {
  // Dotted key relative to the plan ("parallel.tp", "cluster.gpus") or, for job keys, "job.<key>".
  std::string key;
  std::string message;
};

std::vector<Finding> check_plan(const model::ModelSpec& model, const Plan& plan);
// check_plan's offload findings alone (placements the framework or node cannot take, tuning keys
// the placements have no use for); they do not depend on the model.
std::vector<Finding> check_offload(const Plan& plan);

// Checks of a job that do not depend on the plan (amount of training, LoRA targets, sample lengths).
std::vector<Finding> check_job(const model::ModelSpec& model, const Job& job);

// The data type a job's matrix multiplies run in, and whose peak its MFU is counted against: FP8
// for fp8-mixed (its FP8 linears, Transformer Engine; its other GEMMs run in bf16, sim's
// per-op choice), else the precision's own. The one precision -> dtype map (simulator, MFU,
// calibration profiles).
hardware::Dtype compute_dtype(Precision precision);

// Data-parallel degree of a plan: parallel.dp if given, else GPUs / (tp x pp x cp).
int data_parallel_degree(const Plan& plan);
// The ranks that reduce gradients and shard data-parallel state: the data-parallel ranks with the
// context-parallel ones (dp x cp; they hold the same parameters and see other parts of the
// sequence). Sources in plan::sharding_in_effect.
int gradient_group_size(const Plan& plan);
// Whether `micro_batch` per rank splits the plan's global batch over its data-parallel ranks into
// whole accumulation steps (true when the job sets no global batch).
bool splits_global_batch(const Plan& plan, int micro_batch);
// Micro-batches per optimizer step on each data-parallel rank (gradient accumulation steps).
std::int64_t grad_accumulation_steps(const Plan& plan);
// Global batch in samples (the job's, or micro_batch x dp when the job leaves it unset).
std::int64_t global_batch_samples(const Plan& plan);
// The share of a step's seq_len-long sample slots that hold real tokens: 1 when samples are
// packed, mean_tokens / seq_len when each is padded to seq_len (the padding is computed, not learned).
double real_token_fraction(const Job& job);
// A padded sample's expected length in tokens: its distribution's mean within [min, max]
// (fixed: mean, else seq_len; uniform: the middle of [min, max]; normal and lognormal truncated).
double expected_sample_tokens(const Job& job);

// Canonical LoRA target names and what HF module names map to them.
const std::vector<std::string>& lora_target_names();

}  // namespace ftplan::plan
