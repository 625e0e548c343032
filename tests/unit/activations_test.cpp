// ftplan's per-layer activation model against what PyTorch autograd saves: the table
// tests/data/saved_activations.csv, measured with torch.autograd.graph.saved_tensors_hooks on an
// HF-style Llama decoder layer by calibrate/reference/measure_saved_activations.py.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "inventory/inventory.hpp"
#include "io/scenario_io.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

std::vector<std::map<std::string, std::string>> read_table(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  std::string line;
  const auto split = [](const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
    return out;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (columns.empty()) {
      columns = split(line);
      continue;
    }
    const auto cells = split(line);
    REQUIRE(cells.size() == columns.size());
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < cells.size(); ++i) row[columns[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

// The bytes ftplan's inventory keeps as saved activations for one micro-batch of a model of
// `layers` layers of the row's shape, trained as the row says.
double ftplan_saved_bytes(const std::map<std::string, std::string>& r, int layers) {
  // An HF Trainer job (no sharding: torch.autocast under bf16-mixed) on one GPU.
  const std::string text =
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {steps: 1, framework: hf-trainer}\nplans:\n"
      "  - name: p\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n";
  auto sc = io::parse_scenario(text, "activations_test.yaml", test::data_dir(), test::zoo(), test::catalog());
  model::ModelSpec m = sc.model;
  m.hidden = std::stoll(r.at("hidden"));
  m.heads = std::stoi(r.at("heads"));
  m.kv_heads = std::stoi(r.at("kv_heads"));
  m.head_dim = 0;  // hidden / heads, as the script's layer
  m.ffn = std::stoll(r.at("ffn"));
  m.layers = layers;
  plan::Plan p = sc.plans.front();
  plan::Job& job = p.job;
  job.seq_len = std::stoll(r.at("seq"));
  job.micro_batch = std::stoi(r.at("micro_batch"));
  job.dropout = 0;
  const std::string& precision = r.at("precision");
  job.precision = precision == "fp32"   ? plan::Precision::fp32
                  : precision == "bf16" ? plan::Precision::bf16
                                        : plan::Precision::bf16_mixed;
  job.attention = r.at("attention") == "eager" ? plan::AttentionImpl::eager : plan::AttentionImpl::flash;
  job.checkpointing = r.at("checkpointing") == "full" ? plan::Checkpointing::full : plan::Checkpointing::none;
  const std::string& method = r.at("method");
  job.method = method == "full" ? plan::Method::full : plan::Method::lora;
  job.lora.rank = std::stoi(r.at("lora_rank"));
  if (method == "lora_qv") job.lora.targets = {"q", "v"};
  if (method == "lora_all") job.lora.targets = {"q", "k", "v", "o", "gate", "up", "down"};
  const inventory::Inventory inv = inventory::build_inventory(m, p);
  double bytes = 0;
  for (const auto& g : inv.groups)
    if (std::string(g.name) == "saved activations") bytes += g.total();
  return bytes;
}

}  // namespace

TEST_CASE("saved activations per layer equal what PyTorch autograd saves (tests/data/saved_activations.csv)") {
  /* Each row: one HF Llama decoder layer (RMSNorm with its fp32 upcast, RoPE, repeat_kv, eager
   * attention with softmax in fp32, or flash/SDPA; SwiGLU MLP) in fp32, pure bf16 or under
   * torch.autocast(bf16); full fine-tune or LoRA r=16 on q,v or on all linears; with or without
   * full checkpointing. ftplan's "saved activations" of an L-layer model must equal
   *   L x layer_bytes  what each layer's forward saves (deduplicated by storage), plus
   *   shared_bytes     RoPE's cos and sin, the same two tensors for all layers (once per stage).
   * Checked at L = 1 and L = 3, so a per-stage term counted per layer fails too.
   * Not compared, each for its reason:
   *   weight_copy_bytes  autocast's 16-bit casts of the weights: the inventory's separate group
   *                      "autocast 16-bit weight copies" (of all the rank's parameters);
   *   mean_input_bytes   torch 1.13's mean() saves its input (derivatives.yaml then:
   *                      self.numel() in mean_backward kept self); torch 2 keeps self.sym_numel(),
   *                      a number, and ftplan predicts torch 2 on CUDA.
   * Exact: every figure is an integer number of bytes, well inside a double's 2^53. */
  const auto rows = read_table(test::data_dir() / "saved_activations.csv");
  REQUIRE(rows.size() >= 100);
  int eager = 0, autocast = 0, lora = 0, checkpointed = 0, gqa = 0;
  for (const auto& r : rows) {
    std::string label;
    for (const char* k : {"precision", "attention", "hidden", "heads", "kv_heads", "ffn", "seq", "micro_batch",
                          "checkpointing", "method"})
      label += r.at(k) + " ";
    CAPTURE(label);
    const double layer = std::stod(r.at("layer_bytes")), shared = std::stod(r.at("shared_bytes"));
    CHECK(ftplan_saved_bytes(r, 1) == layer + shared);
    CHECK(ftplan_saved_bytes(r, 3) == 3 * layer + shared);
    eager += r.at("attention") == "eager";
    autocast += r.at("precision") == "autocast";
    lora += r.at("method") != "full";
    checkpointed += r.at("checkpointing") == "full";
    gqa += r.at("kv_heads") != r.at("heads");
  }
  // The table covers each mechanism (a shorter table would test less).
  CHECK(eager > 0);
  CHECK(autocast > 0);
  CHECK(lora > 0);
  CHECK(checkpointed > 0);
  CHECK(gqa > 0);
}

TEST_CASE("the final norm keeps what a layer's RMSNorm keeps, plus the head's input when the head trains") {
  /* Llama-3.2-1B (h = 2048), micro-batch 2 x seq 1024 = 2048 tokens, eager modules (HF Trainer).
   * The final RMSNorm keeps, as each layer's norms in tests/data/saved_activations.csv: its fp32
   * input (4h), the fp32 rstd (4) and, when its weight trains, the normalized input in the stream's
   * type (r h); the LM head keeps its input when its weight trains: the norm output in the matmul
   * type (a h; under autocast on an fp32 stream, the head's 16-bit cast of it).
   *   pure bf16, full:   (4h + 4 + 2h + 2h) x 2048
   *   autocast, full:    (4h + 4 + 4h + 2h) x 2048   (fp32 stream, 16-bit cast for the head)
   *   autocast, LoRA:    (4h + 4) x 2048              (frozen norm and head)                    */
  const double h = 2048, n = 2048;
  const auto final_norm = [](const std::string& job) {
    const std::string text =
        "schema_version: 1\nmodel: llama-3.2-1b\njob: {steps: 1, framework: hf-trainer, seq_len: 1024, "
        "micro_batch: 2, " +
        job + "}\nplans:\n  - name: p\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n";
    const auto sc = io::parse_scenario(text, "activations_test.yaml", test::data_dir(), test::zoo(), test::catalog());
    const auto inv = inventory::build_inventory(sc.model, sc.plans.front());
    double bytes = 0;
    for (const auto& g : inv.groups)
      if (std::string(g.name) == "final norm activations") bytes += g.total();
    return bytes;
  };
  CHECK(final_norm("precision: bf16") == (4 * h + 4 + 2 * h + 2 * h) * n);
  CHECK(final_norm("precision: bf16-mixed") == (4 * h + 4 + 4 * h + 2 * h) * n);
  CHECK(final_norm("precision: bf16-mixed, method: lora") == (4 * h + 4) * n);
}

TEST_CASE("torchtitan repeats K and V before SDPA: GQA keeps them at all heads' width") {
  /* torchtitan's Attention.forward calls repeat_kv on K and V, then SDPA, which keeps its inputs
   * for backward; HF (enable_gqa on torch >= 2.5) and flash-attn keep them at the KV width.
   * Llama-3.1-8B (q = 4096, kv = 1024), 32 layers, bf16, flash/SDPA, 2048 tokens, no checkpointing:
   * torchtitan (pytorch-fsdp2) keeps 2 x 2 B x (4096 - 1024) = 12,288 B per token and layer more
   * than FSDP1 with HF: 12,288 x 2048 x 32 = 805,306,368 B. Llama-2-7B (MHA): no difference. */
  const auto saved = [](const std::string& model, const std::string& framework) {
    const std::string text = "schema_version: 1\nmodel: " + model + "\njob: {steps: 1, framework: " + framework +
                             ", seq_len: 2048, micro_batch: 1, attention: sdpa}\nplans:\n  - name: p\n"
                             "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n";
    const auto sc = io::parse_scenario(text, "activations_test.yaml", test::data_dir(), test::zoo(), test::catalog());
    const auto inv = inventory::build_inventory(sc.model, sc.plans.front());
    double bytes = 0;
    for (const auto& g : inv.groups)
      if (std::string(g.name) == "saved activations") bytes += g.total();
    return bytes;
  };
  CHECK(saved("llama-3.1-8b", "pytorch-fsdp2") - saved("llama-3.1-8b", "pytorch-fsdp") == 805306368.0);
  CHECK(saved("llama-2-7b", "pytorch-fsdp2") == saved("llama-2-7b", "pytorch-fsdp"));
}
