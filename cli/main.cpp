// ftplan: the command line. Thin adapters from argv to core calls to writers.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/allocator.hpp"

#include "app.hpp"
#include "common/error.hpp"
#include "io/output_file.hpp"

namespace {

constexpr const char* kUsage = R"(ftplan - capacity planner for LLM fine-tuning

usage: ftplan <verb> [arguments] [options]

verbs:
  zoo list                 the models ftplan knows
  zoo show NAME|FILE       one model's architecture and derived counts (NAME, zoo .yaml or HF config.json)
  hardware list [KIND]     the hardware catalog (gpus, nodes, hosts, drives, nics)
  check SCENARIO           read and validate a scenario; list its plans
  memory SCENARIO          per plan: memory by tier and category, peak per GPU, fit, largest
                           micro-batch and sequence that fit [--plan NAME]
  memory --model M --gpu G --gpus N [--zero 3 --seq 4096 --micro-batch 2 --ckpt full ...]
                           the same without a file
  simulate SCENARIO        per plan: one optimizer step simulated: step time, tokens/s, MFU/HFU,
                           time split, utilization, job time [--plan NAME] [--trace out.json]
                           [--ir step.json] (the step graph as JSON: docs/step-ir.md)
  compare SCENARIO         the plans side by side: fit, GPUs, memory, job time, tokens/s, MFU,
                           peak power, energy, dollars, flash wear, idle GPU time; and a verdict
  plan SCENARIO            search plans (its `search` block) under its `constraints`: Pareto front over
                           job time, dollars and peak power; best plan per constraint [--all] [--threads N]
  sweep SWEEP --out F      many what-ifs: a base scenario and axes of values (grid, zip, random or Latin
                           hypercube samples), on all cores, into F (.csv or .jsonl); resumable
                           [--threads N] [--shard K/N] [--dry-run] (docs/sweep-format.md)
  sweep-merge --out F FILES...
                           join the files of a sharded sweep into the file one unsharded run writes
  import FILE... [--out F] a scenario from training configs (DeepSpeed ds_config.json, accelerate config
                           YAML, torchtune recipe, torchtitan .toml, TrainingArguments/TRL JSON or YAML,
                           PEFT adapter_config.json, Axolotl and LLaMA-Factory YAML), each value commented
                           with its source, unused keys listed; --model, --gpu, --gpus and the quick-form
                           flags override; --model-config for a model the zoo lacks (docs/import.md)
  memory|simulate|compare --from FILE...
                           the same scenario, evaluated without writing it
  calibrate [--quick]      measure this machine (GPU, CPU/DRAM, storage); --out writes a profile
  validate SCENARIO        per plan: run the step for real with the executor on this machine and
                           compare with the simulation [--plan NAME] [--steps N] [--scale layers=N,hidden=H]
                           [--storage-dir DIR[,DIR]] [--state-dir DIR] [--device cpu|cuda] [--train] [--trace out]
  help                     this text; VERB --help lists a verb's options

options shared by all verbs:
  --zoo DIR                model zoo folder (default: $FTPLAN_ZOO, else the shipped model_zoo)
  --format table|json|csv  output format
)";

}  // namespace

// Ctrl-C, kill or a closed terminal: the temporaries of the files being written go, then the
// process dies of the signal as usual (commands with their own handler call the same unlink).
extern "C" void on_terminating_signal(int sig) {
  ftplan::io::unlink_live_temporaries();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int main(int argc, char** argv) {
  ftplan::keep_freed_memory();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_terminating_signal);
  // Past the file-size limit (ulimit -f) a write should fail with EFBIG, which the writers report
  // and clean up after, rather than kill the process with SIGXFSZ halfway through a file.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 2 || args[1] == "help" || args[1] == "--help" || args[1] == "-h") {
    std::fputs(kUsage, args.size() < 2 ? stderr : stdout);
    return args.size() < 2 ? 2 : 0;
  }
  const std::string& verb = args[1];
  try {
    if (verb == "zoo") return ftplan::cli::cmd_zoo(args);
    if (verb == "hardware") return ftplan::cli::cmd_hardware(args);
    if (verb == "check") return ftplan::cli::cmd_check(args);
    if (verb == "memory") return ftplan::cli::cmd_memory(args);
    if (verb == "simulate") return ftplan::cli::cmd_simulate(args);
    if (verb == "compare") return ftplan::cli::cmd_compare(args);
    if (verb == "plan") return ftplan::cli::cmd_plan(args);
    if (verb == "sweep") return ftplan::cli::cmd_sweep(args);
    if (verb == "sweep-merge") return ftplan::cli::cmd_sweep_merge(args);
    if (verb == "import") return ftplan::cli::cmd_import(args);
    if (verb == "calibrate") return ftplan::cli::cmd_calibrate(args);
    if (verb == "validate") return ftplan::cli::cmd_validate(args);
    fmt::print(stderr, "error: unknown verb '{}'; run `ftplan help`\n", verb);
    return 2;
  } catch (const ftplan::cli::HelpRequested& e) {
    fmt::print("usage: ftplan {} [arguments] [options] (the verbs: `ftplan help`)\n{}", verb, e.what());
    return 0;
  } catch (const ftplan::InputError& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "error: {}\n", d.to_string());
    return 2;
  } catch (const ftplan::UsageError& e) {
    fmt::print(stderr, "error: {}\nrun `ftplan help` for usage\n", e.what());
    return 2;
  } catch (const ftplan::Error& e) {  // the machine refused, or this build or machine cannot run it
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::logic_error& e) {  // FTPLAN_ASSERT: a bug in ftplan, not in the input
    fmt::print(stderr, "error: {}\nthis is a bug in ftplan: please report it with the command and its files\n",
               e.what());
    return 1;
  } catch (const std::exception& e) {  // std::bad_alloc and the like
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
