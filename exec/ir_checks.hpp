// What the executor asks of a step IR before it runs it: each stream's order, that in-order
// workers run it without a deadlock or a race, that one machine can run it, and how an attention
// op maps onto the device's two GEMMs. (Split from executor.cpp: these read the IR, nothing else.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/step_ir.hpp"

namespace ftplan::exec {

// The ops each stream's worker runs, in order: the IR's ops of that stream in issue order.
std::vector<std::vector<std::size_t>> stream_order(const schedule::StepIR& ir);
// Empty when in-order workers, each starting an op once its deps are done, run every op of `ir`
// without a race: every op that reads or writes a tensor comes after the tensor's allocation,
// and its free after every such op, in the order deps and streams impose (not only in issue
// order, which is all schedule::dry_run checks). Else the first problem: where the workers would
// wait forever, or which op may touch a tensor before it exists or after it is freed.
std::string schedulable(const schedule::StepIR& ir);

// An attention op as the device runs it: S = Q K^T and O = S V over `n` keys, `repeats` times,
// with n chosen so that the FLOPs are the op's (a causal kernel computes about half the scores:
// its n is half the keys).
struct AttentionCall {
  std::int64_t m = 0, n = 0, k = 0;
  int repeats = 0;
};
AttentionCall attention_call(const schedule::Op& op);

// Why `ir` cannot run on one machine (collectives over more than one rank, pipeline sends,
// gradients kept on NVMe, which the IR never reads back for the optimizer step); empty when it can.
std::string unsupported(const schedule::StepIR& ir);

}  // namespace ftplan::exec
