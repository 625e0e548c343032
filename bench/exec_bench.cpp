// The executor's own cost per op (issue 18: small next to a 1 ms kernel). A synthetic step IR of
// `ops` ops that do nothing (markers) over two streams, every other op waiting on the other
// stream's last op, so each op costs a dependency wait, a wake-up across threads and the
// bookkeeping, and no work. Prints the step's wall time per op, best of 3 steps. Not a test.
//
//   build/bench/exec_bench [ops]      (default 20000)
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "exec/cpu_device.hpp"
#include "exec/executor.hpp"

int main(int argc, char** argv) {
  using namespace ftplan;
  const int n = argc > 1 ? std::max(2, std::atoi(argv[1])) : 20000;
  for (const bool cross : {false, true}) {
    schedule::StepIR ir;
    ir.ops.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      schedule::Op& op = ir.ops[static_cast<std::size_t>(i)];
      op.kind = schedule::OpKind::marker;
      op.stream = cross && i % 2 ? schedule::Stream::h2d : schedule::Stream::compute;
      if (cross && i > 0) op.deps = {i - 1};  // alternate streams: every op waits on the other's
    }
    exec::CpuDevice device(std::uint64_t{1} << 20, 2 * schedule::kStreams);
    exec::Options o;
    o.steps = 4;
    const exec::Measured m = exec::run(ir, plan::Plan{}, device, o);
    if (!m.ok) {
      fmt::print("error: {}\n", m.problem);
      return 1;
    }
    double best = 1e300;
    for (std::size_t s = 1; s < m.step_s.size(); ++s) best = std::min(best, m.step_s[s]);
    fmt::print("{} ops {}: {:.2f} us per op ({:.3f} s per step)\n", n,
               cross ? "alternating between two streams (a cross-thread wait each)" : "on one stream", best / n * 1e6,
               best);
  }
  return 0;
}
