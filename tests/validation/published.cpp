#include "published.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/rows.hpp"
#include "io/scenario_io.hpp"
#include "tests/unit/test_support.hpp"

namespace ftplan::validation {

const std::string& PublishedRow::at(const std::string& key) const {
  static const std::string empty;
  auto it = col.find(key);
  return it == col.end() ? empty : it->second;
}

namespace {

bool contains(const std::string& s, const char* what) { return to_lower(s).find(to_lower(what)) != std::string::npos; }

// Leading integer of a cell ("8192 (default toml; not restated)" -> 8192), or nullopt.
std::optional<long long> leading_int(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::size_t j = i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  if (j == i) return std::nullopt;
  return std::stoll(s.substr(i, j - i));
}

// Model column -> zoo name: lowercase, the part after '/', without "(...)"; Megatron's "GPT
// (Megatron) 1008B" -> megatron-gpt-1t; a few spellings differ from the zoo's.
std::string zoo_name(std::string model) {
  if (contains(model, "megatron")) {
    const std::regex size_re("([0-9.]+)B");
    std::smatch m;
    if (std::regex_search(model, m, size_re))
      return m[1] == "1008" ? "megatron-gpt-1t" : "megatron-gpt-" + to_lower(m[1].str()) + "b";
  }
  if (auto slash = model.rfind('/'); slash != std::string::npos) model = model.substr(slash + 1);
  if (auto paren = model.find('('); paren != std::string::npos) model = model.substr(0, paren);
  std::string n = to_lower(std::string(trim(model)));
  std::replace(n.begin(), n.end(), ' ', '-');
  std::replace(n.begin(), n.end(), '_', '-');
  static const std::map<std::string, std::string> alias = {
      {"bloomz-7b1", "bloom-7b1"},
      {"t0-3b", "t0-3b"},
      {"mt0-xxl", "mt0-xxl"},
      // Llama 3.3 70B has Llama 3.1 70B's architecture (meta-llama/Llama-3.3-70B-Instruct config.json).
      {"llama-3.3-70b", "llama-3.1-70b"}};
  if (auto it = alias.find(n); it != alias.end()) return it->second;
  return n;
}

std::string gpu_name(const std::string& g) {
  if (to_lower(std::string(trim(g))).rfind("not stated", 0) == 0) return "";
  if (contains(g, "h100 96gb")) return "h100-96gb-500w";
  if (contains(g, "h200")) return "h200-sxm-141gb";
  if (contains(g, "h100")) return "h100-sxm-80gb";
  if (contains(g, "a100") && contains(g, "40gb")) return "a100-sxm4-40gb";
  if (contains(g, "40gb gpus")) return "a100-sxm4-40gb";
  if (contains(g, "a100")) return "a100-sxm4-80gb";
  if (contains(g, "v100") && (contains(g, "sxm3") || contains(g, "dgx-2"))) return "v100-sxm3-32gb";  // DGX-2 / HGX-2
  if (contains(g, "v100") && contains(g, "16gb")) return "v100-sxm2-16gb";
  if (contains(g, "v100")) return "v100-sxm2-32gb";
  if (contains(g, "4090")) return "rtx-4090";
  if (contains(g, "a6000")) return "rtx-a6000";
  return "";
}

// LoRA targets from the peft column: "q,v,o + MLP", "all-linear", Qwen's c_attn/c_proj/w1/w2.
std::string lora_targets(const std::string& peft) {
  if (contains(peft, "all-linear")) return "[all-linear]";
  std::vector<std::string> t;
  if (contains(peft, "c_attn")) t = {"q", "k", "v"};
  if (contains(peft, "c_proj")) t.insert(t.end(), {"o", "down"});  // Qwen1: attn.c_proj and mlp.c_proj
  if (contains(peft, "w1")) t.push_back("up");
  if (contains(peft, "w2")) t.push_back("gate");
  const std::regex list_re("on ([qkvo](,[qkvo])*)");
  std::smatch m;
  if (std::regex_search(peft, m, list_re)) {
    std::string mods = m[1];
    for (char c : mods)
      if (c != ',') t.push_back(std::string(1, c));
  }
  if (contains(peft, "+ mlp")) t.insert(t.end(), {"gate", "up", "down"});
  if (t.empty()) return "";
  return "[" + join(t, ", ") + "]";
}

}  // namespace

std::vector<PublishedRow> read_published(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<io::CsvRecord> records = io::read_csv(text.str(), path);  // the file has CRLF line ends
  std::vector<PublishedRow> rows;
  if (records.empty()) return rows;
  const std::vector<std::string>& header = records.front().cells;
  for (std::size_t k = 1; k < records.size(); ++k) {
    const io::CsvRecord& record = records[k];
    if (record.cells.size() == 1 && trim(record.cells.front()).empty()) continue;  // a blank line
    PublishedRow r;
    r.line = record.line;
    for (std::size_t i = 0; i < header.size() && i < record.cells.size(); ++i) r.col[header[i]] = record.cells[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

const char* to_string(MemoryKind k) {
  switch (k) {
    case MemoryKind::allocated: return "allocated";
    case MemoryKind::reserved: return "reserved";
    case MemoryKind::device: return "device";
  }
  return "?";
}

MemoryKind memory_kind(const PublishedRow& row) {
  const std::string& metric = row.at("measured_metric");
  const std::string& source = row.at("source_url_or_repo_path");
  if (contains(metric, "nvidia-smi")) return MemoryKind::device;
  // torchtitan logs max_reserved_gib (torchtitan/components/metrics.py); torchtune's README table
  // reports its logged peak_memory_reserved.
  if (contains(source, "torchtitan") || contains(source, "torchtune")) return MemoryKind::reserved;
  // Unnamed kinds (PEFT docs, Qwen README): what a person reads off nvidia-smi.
  return MemoryKind::device;
}

double measured_bytes(const PublishedRow& row) {
  const double v = std::stod(row.at("measured_value"));
  const std::string& unit = row.at("unit");
  if (unit == "GiB") return v * (1u << 30);
  if (unit == "GB") return v * 1e9;
  if (unit == "MB") return v * (1u << 20);  // nvidia-smi prints MiB and labels them MB
  throw std::runtime_error("unknown unit " + unit);
}

Mapped scenario_for(const PublishedRow& row, const std::vector<PublishedRow>& all) {
  Mapped out;
  const auto need = [&](const char* what, bool ok) {
    if (!ok) out.missing.push_back(what);
  };
  const std::string model = zoo_name(row.at("model"));
  const std::string gpu = gpu_name(row.at("gpu_type"));
  const auto seq = leading_int(row.at("seq_len"));
  auto micro = leading_int(row.at("micro_batch"));
  // Narayanan et al. 2021 (Table 1) do not state the micro-batch size; their scaling runs keep
  // it small to keep the pipeline bubble small (sec. 3.4), and 1 is what Megatron-LM's example
  // scripts of that release use for the large GPT configurations. Taken as 1 (an assumption).
  const bool megatron_table = contains(row.at("source_url_or_repo_path"), "2104.04473");
  if (!micro && megatron_table) micro = 1;
  const auto global = leading_int(row.at("global_batch"));
  const auto gpus = leading_int(row.at("gpus"));
  const std::string& peft = row.at("peft");
  const std::string& par = row.at("parallelism");
  const std::string& prec = row.at("precision");
  const std::string& ckpt = row.at("act_ckpt");
  need("model in the zoo", test::zoo().find(model) != nullptr);
  need("GPU type", !gpu.empty());
  need("seq_len", seq.has_value());
  need("micro_batch", micro.has_value());
  need("precision", !prec.empty());
  need("activation checkpointing", !ckpt.empty() && !contains(ckpt, "not stated"));
  const bool lora = contains(peft, "lora");
  if (lora)
    need("LoRA targets and rank", !lora_targets(peft).empty() && std::regex_search(peft, std::regex("r[0-9]+")));
  if (!out.missing.empty()) return out;

  const bool qlora = contains(peft, "qlora") || contains(peft, "q-lora");
  std::string method = qlora ? "qlora" : (lora ? "lora" : "full");
  // The 16-bit format named wins over an fp32 mentioned for reductions ("param bf16 / reduce fp32").
  std::string precision = "bf16-mixed";
  // "FP8", "amp_fp8 (TE)", "bf16 mixed + Float8 linears (torchao)": FP8 linears on a bf16 recipe.
  if (contains(prec, "fp8") || contains(prec, "float8"))
    precision = "fp8-mixed";
  else if (contains(prec, "pure bf16"))
    precision = "bf16";
  else if (contains(prec, "bf16"))
    precision = "bf16-mixed";
  else if (contains(prec, "fp16"))
    precision = "fp16-mixed";
  else if (contains(prec, "fp32"))
    precision = "fp32";
  std::string framework = "hf-trainer";
  std::string parallel;
  const std::string& src = row.at("source_url_or_repo_path");
  // A recipe's stack is its source's: torchtune's distributed recipes shard with FSDP2 inside
  // torchtune's profile; Unsloth's own tables run Unsloth.
  const bool own_stack = contains(src, "torchtune") || contains(src, "unslothai/unsloth");
  if (contains(src, "torchtune")) framework = "torchtune";
  if (contains(src, "unslothai/unsloth")) framework = "unsloth";
  if (own_stack) {
    // (set above)
  } else if (contains(par, "deepspeed")) {
    framework = "deepspeed";
    std::smatch m;
    if (std::regex_search(par, m, std::regex("ZeRO-([0-3])"))) parallel = fmt::format("{{zero: {}}}", m[1].str());
  } else if (contains(par, "fsdp2") ||
             (contains(par, "fsdp") && contains(row.at("source_url_or_repo_path"), "torchtitan"))) {
    framework = "pytorch-fsdp2";
    // NeMo Automodel's "FSDP2 4-way x TP2": tensor parallelism inside each FSDP2 replica;
    // torchtitan's "FSDP 4, CP 2": context parallelism beside it.
    std::smatch m;
    std::vector<std::string> degrees;
    if (std::regex_search(par, m, std::regex("TP ?([0-9]+)")) && m[1] != "1") degrees.push_back("tp: " + m[1].str());
    if (std::regex_search(par, m, std::regex("CP ?([0-9]+)")) && m[1] != "1") degrees.push_back("cp: " + m[1].str());
    if (!degrees.empty()) parallel = fmt::format("{{{}}}", fmt::join(degrees, ", "));
  } else if (contains(par, "fsdp")) {
    framework = "pytorch-fsdp";
  } else if (contains(par, "tp ")) {
    framework = "megatron";
    std::smatch m;
    if (std::regex_search(par, m, std::regex("TP ([0-9]+) x PP ([0-9]+) x DP ([0-9]+)")))
      parallel = fmt::format("{{tp: {}, pp: {}, dp: {}, zero: 1}}", m[1].str(), m[2].str(), m[3].str());
  }
  std::string checkpointing = "none";
  // ("none" contains "on": the negative spellings are read first.) torchtitan's "selective layer"
  // is full checkpointing of every other layer (its selective_ac_option "2", the tomls' setting
  // then); "selective op" its op-level policy.
  if (contains(ckpt, "selective layer"))
    checkpointing = "full\n  checkpoint_every: 2";
  else if (contains(ckpt, "selective"))
    checkpointing = "selective";
  else if (ckpt == "none" || ckpt == "off" || contains(ckpt, "none") || contains(ckpt, "off"))
    checkpointing = "none";
  else if (contains(ckpt, "on") || contains(ckpt, "full"))
    checkpointing = "full";
  // bitsandbytes' paged 8-bit AdamW; the optimizer step fused into backward (torchtune's
  // optimizer_in_bwd) unless the row says it is off.
  const std::string& opt = row.at("optimizer");
  const bool in_backward = contains(opt, "optimizer_in_bwd") && !contains(opt, "no optimizer_in_bwd");
  std::string optimizer = contains(opt, "8bit") ? "adamw-8bit" : "adamw";
  if (contains(opt, "paged") || in_backward)
    optimizer = fmt::format("{{name: {}, paged: {}, in_backward: {}}}", optimizer, contains(opt, "paged"), in_backward);

  // Documented behaviour of the stack a row names:
  // - transformers before v4.36: eager attention (SDPA became the default in v4.36) and the
  //   Trainer's legacy per-parameter AdamW ("adamw_hf", the default optim until then);
  // - transformers v4.27 and older ran on PyTorch 1.x, whose zero_grad() kept gradients allocated;
  // - a CUDA context size stated in the notes of any row of a source applies to all rows of that
  //   source (one machine, one software stack); "compile on"/"torch.compile" rows compile.
  std::string extra;
  const std::string& source = row.at("source_url_or_repo_path");
  const std::string& notes = row.at("notes");
  std::smatch version;
  if (contains(source, "transformers") && std::regex_search(source, version, std::regex("\\(v4\\.([0-9]+)\\)")) &&
      std::stoi(version[1]) < 36)
    extra += "  attention: eager\n  optimizer: " +
             (optimizer == "adamw" ? std::string("{name: adamw, implementation: per-parameter}") : optimizer) + "\n" +
             std::string(std::stoi(version[1]) <= 27 ? "  gradients_persist: true\n" : "");
  else
    extra += "  optimizer: " + optimizer + "\n";
  for (const auto& other : all) {
    std::smatch context;
    const std::string& other_notes = other.at("notes");
    if (other.at("source_url_or_repo_path") == source &&
        std::regex_search(other_notes, context, std::regex("([0-9]+) MB CUDA context"))) {
      extra += "  cuda_context: " + context[1].str() + " MiB\n";  // nvidia-smi "MB" are MiB
      break;
    }
  }
  if ((contains(notes, "compile on") || contains(notes, "torch.compile")) && !contains(notes, "compile not stated") &&
      !contains(notes, "compile=off") && !contains(notes, "compile off") && !contains(notes, "no compile"))
    extra += "  compile: true\n";
  // llm-foundry's benchmark script runs MPT with attn_impl "triton" (scripts/train/benchmarking/
  // submit_benchmarks.py, its default): flash-attn's Triton FlashAttention, FlashAttention-1's
  // algorithm (it supports ALiBi's bias, which flash-attn 1.x's CUDA kernels did not).
  if (contains(source, "llm-foundry")) extra += "  attention: flash-v1\n";
  // Composer's FSDP mixed_precision "DEFAULT" of llm-foundry's benchmark tables (torch 1.13 era,
  // Composer 0.13-0.14, composer/trainer/dist_strategy.py get_mixed_precision): param_dtype fp32,
  // reduce_dtype the autocast type, under torch.autocast ("amp_bf16"). (Composer later changed
  // DEFAULT to bf16 parameters and fp32 reduction.) "PURE" is 16-bit throughout.
  if (contains(prec, "mp=default") && framework == "pytorch-fsdp")
    extra += "  fsdp_mixed_precision: {param_dtype: fp32, reduce_dtype: bf16}\n";
  // The row's sequence length is what it trained with; ALiBi models (MPT) have no fixed context, so
  // the zoo's max_context is raised to it after reading (validation would refuse it first).
  const std::int64_t zoo_context = test::zoo().find(model)->max_context;
  std::string yaml = fmt::format(
      "schema_version: 1\nname: row {}\nmodel: {}\njob:\n  method: {}\n  seq_len: {}\n  micro_batch: {}\n"
      "  steps: 1\n  precision: {}\n  activation_checkpointing: {}\n  framework: {}\n",
      row.line, model, method, std::min<std::int64_t>(*seq, zoo_context), *micro, precision, checkpointing, framework);
  yaml += extra;
  if (global) yaml += fmt::format("  global_batch: {}\n", *global);
  if (lora) {
    std::smatch m;
    std::regex_search(peft, m, std::regex("r([0-9]+)"));
    std::smatch d;
    const std::string dropout =
        std::regex_search(peft, d, std::regex("dropout ([0-9.]+)")) ? ", dropout: " + d[1].str() : std::string();
    yaml += fmt::format("  lora: {{rank: {}, targets: {}{}}}\n", m[1].str(), lora_targets(peft), dropout);
  }
  // A GPTQ base (Qwen's "Q-LoRA" on its Int4 checkpoints) is 4-bit integer weights with group
  // constants, not bitsandbytes' NF4.
  if (qlora && (contains(peft, "gptq") || contains(peft, "int4"))) yaml += "  quant: {kind: int4}\n";
  // torchtune's recipes use chunked cross-entropy (CEWithChunkedOutputLoss, 8 chunks).
  if (framework == "torchtune") yaml += "  loss: {chunks: 8}\n";
  // Megatron-LM of 2021 predates FlashAttention (2022): unfused QK^T and AV around its fused
  // scale-mask-softmax kernel (megatron/model/fused_softmax.py).
  if (megatron_table) yaml += "  attention: eager\n";
  // "2 nodes x 2 GPUs": that many GPUs to a node, so the data-parallel traffic crosses the network.
  std::string per_node;
  std::smatch nodes;
  const std::string layout = par + " " + row.at("gpu_type");
  if (std::regex_search(layout, nodes, std::regex("([0-9]+) nodes? x ([0-9]+)")))
    per_node = ", gpus_per_node: " + nodes[2].str();
  yaml += fmt::format("plans:\n  - name: published\n    cluster: {{gpu: {}, gpus: {}{}}}\n", gpu, gpus.value_or(1),
                      per_node);
  if (!parallel.empty()) yaml += "    parallel: " + parallel + "\n";
  if (contains(row.at("offload"), "activation offloading to cpu")) yaml += "    offload: {activations: cpu}\n";
  plan::Scenario s = io::parse_scenario(yaml, fmt::format("published row {}", row.line), test::data_dir(), test::zoo(),
                                        test::catalog());
  // The row's own architecture columns win over the zoo entry (llm-foundry's MPT configs differ
  // from the HF checkpoints in vocabulary, for one).
  model::ModelSpec& m = s.model;
  const auto set = [&](const char* col, auto& field) {
    if (auto v = leading_int(row.at(col))) field = static_cast<std::remove_reference_t<decltype(field)>>(*v);
  };
  set("layers", m.layers);
  set("hidden", m.hidden);
  set("heads", m.heads);
  set("kv_heads", m.kv_heads);
  set("ffn", m.ffn);
  set("vocab", m.vocab);
  if (*seq > m.max_context) {
    m.max_context = *seq;
    for (auto& p : s.plans) p.job.seq_len = *seq;
    s.job.seq_len = *seq;
  }
  // A sequence-classification fine-tune has a small classifier instead of the MLM/LM head.
  if (contains(row.at("model"), "seq-classification")) m.mlm_head = false;
  out.scenario = std::move(s);
  return out;
}

}  // namespace ftplan::validation
