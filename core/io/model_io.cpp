#include "io/model_io.hpp"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/readers.hpp"
#include "io/yaml_reader.hpp"

namespace ftplan::io {

using detail::MapView;
using detail::Reader;
using model::Architecture;
using model::BiasKind;
using model::FfnKind;
using model::ModelSpec;
using model::NormKind;
using model::Positional;

namespace detail {

void read_model_fields(MapView& v, ModelSpec& m) {
  v.get("display_name", m.display_name);
  v.get("family", m.family);
  v.get_enum<Architecture>("architecture", m.architecture);
  v.get_required("hidden", m.hidden, 1);
  v.get_required("layers", m.layers, 1);  // upper bounds: model::check
  v.get("encoder_layers", m.encoder_layers, 0);
  v.get_required("heads", m.heads, 1);
  v.get("kv_heads", m.kv_heads, 1);
  v.get("head_dim", m.head_dim, 1);
  if (!v.has("moe")) v.require("ffn");
  v.get("ffn", m.ffn, 1);
  v.get_enum<FfnKind>("ffn_kind", m.ffn_kind);
  v.get_required("vocab", m.vocab, 1);
  v.get("tied_embeddings", m.tied_embeddings);
  v.get_enum<NormKind>("norm", m.norm);
  v.get("norms_per_layer", m.norms_per_layer, 0, 8);
  v.get("final_norm", m.final_norm);
  v.get("embedding_norm", m.embedding_norm);
  v.get_enum<BiasKind>("bias", m.bias);
  v.get("lm_head_bias", m.lm_head_bias);
  v.get("parallel_residual", m.parallel_residual);
  v.get_enum<Positional>("positional", m.positional);
  v.get("rope_fraction", m.rope_fraction, 0.0, 1.0);
  v.get_required("max_context", m.max_context, 1);
  v.get("type_vocab", m.type_vocab, 0, 1000000);
  v.get("pooler", m.pooler);
  v.get("mlm_head", m.mlm_head);
  v.get("relative_buckets", m.relative_buckets, 1, 100000);
  if (MapView a = v.map("attention"); a.valid()) {
    a.get("sliding_window", m.attention.sliding_window, 0);
    a.get("local_every", m.attention.local_every, 0, 1000);
    a.get("logit_softcap", m.attention.logit_softcap, 0.0);
    a.finish();
  }
  v.get("final_logit_softcap", m.final_logit_softcap, 0.0);
  v.get("dropout", m.dropout, 0.0, 1.0);
  if (MapView e = v.map("moe"); e.valid()) {
    e.get_required("experts", m.moe.experts, 1);
    e.get_required("experts_per_token", m.moe.experts_per_token, 1, 100000);
    e.get("shared_experts", m.moe.shared_experts, 0, 1000);
    e.get("expert_ffn", m.moe.expert_ffn, 1);
    e.get("shared_expert_ffn", m.moe.shared_expert_ffn, 1);
    e.get("every", m.moe.every, 1, 1000);
    e.get("first", m.moe.first, 0, 100000);
    e.get("router_bias", m.moe.router_bias);
    e.finish();
  }
  if (MapView p = v.map("published"); p.valid()) {
    p.get_required("params", m.published.params, 1);
    p.get("exact", m.published.exact);
    p.get("tolerance", m.published.tolerance, 0);
    p.require("source", "where the figure comes from");
    p.get("source", m.published.source);
    p.finish();
  }
  if (m.display_name.empty()) m.display_name = m.name;
  // Structural checks, reported at the key they concern.
  for (const auto& [key, message] : model::check(m)) {
    const auto dot = key.find('.');
    v.reader().error(dot == std::string::npos ? v.location_of(key) : v.location_of(key.substr(0, dot)), v.key_path(key),
                     message);
  }
}

}  // namespace detail

namespace {

const std::regex& name_pattern() {
  static const std::regex re("[a-z0-9][a-z0-9.\\-]*");
  return re;
}

ModelSpec read_zoo_model(const YAML::Node& root, Reader& reader, const std::string& stem) {
  ModelSpec m;
  MapView v = reader.root(root);
  if (!v.valid()) return m;
  int version = 0;
  v.require("schema_version");
  if (v.get("schema_version", version) && version != 1)
    reader.error(v.location_of("schema_version"), "schema_version",
                 fmt::format("{} is not a model-format version this ftplan reads (it reads 1)", version));
  v.require("name");
  if (v.get("name", m.name)) {
    if (!std::regex_match(m.name, name_pattern()))
      reader.error(v.location_of("name"), "name", "use lowercase letters, digits, '.' and '-'");
    else if (!stem.empty() && m.name != stem)
      reader.error(v.location_of("name"), "name",
                   fmt::format("'{}' differs from the file name '{}.yaml'", m.name, stem));
  }
  detail::read_model_fields(v, m);
  v.finish();
  return m;
}

}  // namespace

ModelSpec load_model_file(const std::filesystem::path& path) {
  return parse_model_file(detail::read_input_file(path), path);
}

ModelSpec parse_model_file(std::string_view text, const std::filesystem::path& path) {
  const YAML::Node root = detail::load_yaml_text(text, path.string());
  Reader reader(path.string());
  ModelSpec m = read_zoo_model(root, reader, path.stem().string());
  reader.throw_if_any();
  return m;
}

namespace {

// The zoo's model files, sorted by their models' names (a file's stem is its model's name).
std::vector<std::filesystem::path> zoo_files(const std::filesystem::path& zoo_dir) {
  const auto dir = zoo_dir / "models";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError({dir.string(), 0, 0}, "", "the model zoo folder is missing (set --zoo or FTPLAN_ZOO)");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end(), [](const std::filesystem::path& a, const std::filesystem::path& b) {
    return natural_less(a.stem().string(), b.stem().string());
  });
  return files;
}

}  // namespace

model::Zoo load_zoo(const std::filesystem::path& zoo_dir) {
  std::vector<model::ModelSpec> models;
  Diagnostics all;
  for (const auto& f : zoo_files(zoo_dir)) {
    try {
      models.push_back(load_model_file(f));
    } catch (const InputError& e) {
      all.append(e.diagnostics());
    }
  }
  all.throw_if_any();
  return model::Zoo(std::move(models));
}

model::Zoo lazy_zoo(const std::filesystem::path& zoo_dir) {
  std::vector<std::string> names;
  for (const auto& f : zoo_files(zoo_dir)) names.push_back(f.stem().string());
  const std::filesystem::path dir = zoo_dir / "models";
  return model::Zoo(std::move(names),
                    [dir](const std::string& name) { return load_model_file(dir / (name + ".yaml")); });
}

// ---------------------------------------------------------------------------------------------
// Hugging Face config.json. Field names per transformers' configuration_*.py of each model type;
// defaults are those classes' defaults where a config omits a key.

namespace {

struct HfReader {
  MapView& v;
  ModelSpec& m;
  // `min` 1 for counts where 0 is not a value (num_key_value_heads: 0 would read as "as many
  // as the query heads", silently); model::check bounds the rest.
  std::int64_t i64(const char* key, std::int64_t fallback, bool required = true, std::int64_t min = 0) {
    std::int64_t out = fallback;
    if (!v.has(key)) {
      if (required && fallback == 0) v.require(key);
      return fallback;
    }
    v.get(key, out, min);
    return out;
  }
  // Into an int field: values past int's range are errors, not wrapped (2^32 + 1 layers is not 1).
  int i32(const char* key, int fallback, bool required = true, int min = 0) {
    int out = fallback;
    if (!v.has(key)) {
      if (required && fallback == 0) v.require(key);
      return fallback;
    }
    v.get(key, out, min);
    return out;
  }
  bool flag(const char* key, bool fallback) {
    bool out = fallback;
    v.get(key, out);
    return out;
  }
  std::string text(const char* key, std::string fallback = {}) {
    std::string out = std::move(fallback);
    v.get(key, out);
    return out;
  }
  double real(const char* key, double fallback) {
    double out = fallback;
    v.get(key, out);
    return out;
  }
  // First present key of several spellings (GPT-2 n_embd vs hidden_size, ...).
  std::int64_t any(std::initializer_list<const char*> keys, std::int64_t fallback = 0) {
    for (const char* k : keys)
      if (v.has(k)) return i64(k, fallback);
    if (fallback == 0) v.require(*keys.begin());
    return fallback;
  }
  int any32(std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (v.has(k)) return i32(k, 0);
    v.require(*keys.begin());
    return 0;
  }
};

// The config.json key a ModelSpec field was read from: the first of its spellings across the
// model types above that the file has ("" when none: a derived or defaulted field).
std::string_view hf_key_of(MapView& v, std::string_view field) {
  static const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> spellings = {
      {"hidden", {"hidden_size", "n_embd", "n_embed", "d_model"}},
      {"layers", {"num_hidden_layers", "n_layer", "n_layers", "num_decoder_layers"}},
      {"encoder_layers", {"num_layers"}},
      {"heads", {"num_attention_heads", "n_head", "n_heads", "num_heads"}},
      {"kv_heads", {"num_key_value_heads", "num_kv_heads"}},
      {"head_dim", {"head_dim", "d_kv"}},
      {"ffn", {"intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "expansion_ratio"}},
      {"vocab", {"vocab_size"}},
      {"max_context", {"max_position_embeddings", "n_positions", "seq_length", "max_seq_len"}},
      {"rope_fraction", {"rotary_pct"}},
      {"moe.experts", {"num_local_experts"}},
      {"moe.experts_per_token", {"num_experts_per_tok"}},
      {"attention.sliding_window", {"sliding_window"}},
  };
  for (const auto& [name, keys] : spellings)
    if (name == field)
      for (const std::string_view k : keys)
        if (v.has(k)) return k;
  return {};
}

FfnKind act_kind(const std::string& act, bool gated) {
  const bool gelu = act.find("gelu") != std::string::npos;
  if (gated) return gelu ? FfnKind::geglu : FfnKind::swiglu;
  return act == "relu" ? FfnKind::relu : FfnKind::gelu;
}

void read_llama_like(HfReader& r, const std::string& type) {
  ModelSpec& m = r.m;
  m.family = type;
  m.hidden = r.i64("hidden_size", 0);
  m.layers = r.i32("num_hidden_layers", 0);
  m.heads = r.i32("num_attention_heads", 0);
  m.kv_heads = r.i32("num_key_value_heads", m.heads, false, 1);
  m.head_dim = r.i32("head_dim", 0, false);
  m.ffn = r.i64("intermediate_size", 0);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("max_position_embeddings", 0);
  m.norm = NormKind::rmsnorm;
  m.positional = Positional::rope;
  const std::string act = r.text(type == "gemma2" ? "hidden_activation" : "hidden_act", "silu");
  m.ffn_kind = act_kind(act, true);
  // Only Gemma's config class defaults to tied embeddings among these.
  m.tied_embeddings = r.flag("tie_word_embeddings", type == "gemma2" || type == "gemma");
  if (type == "qwen2" || type == "qwen2_moe") m.bias = BiasKind::qkv;  // Qwen2Attention: q/k/v bias=True, o bias=False
  if (r.flag("attention_bias", false)) m.bias = BiasKind::qkv;
  if (r.flag("mlp_bias", false)) m.bias = BiasKind::all;
  const bool use_sw = type == "qwen2" ? r.flag("use_sliding_window", false) : true;
  if (use_sw) m.attention.sliding_window = r.i64("sliding_window", 0, false);
  if (type == "gemma2") {
    m.norms_per_layer = 4;        // input, post-attention, pre-feedforward, post-feedforward (Gemma2DecoderLayer)
    m.attention.local_every = 2;  // Gemma2: layers with even index use the sliding window
    m.attention.logit_softcap = r.real("attn_logit_softcapping", 0);
    m.final_logit_softcap = r.real("final_logit_softcapping", 0);
  }
  if (type == "mixtral") {
    m.moe.experts = r.i32("num_local_experts", 8, false);
    m.moe.experts_per_token = r.i32("num_experts_per_tok", 2, false);
  }
}

void read_gpt2(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "gpt2";
  m.hidden = r.i64("n_embd", 0);
  m.layers = r.i32("n_layer", 0);
  m.heads = r.i32("n_head", 0);
  m.ffn = r.i64("n_inner", 4 * m.hidden, false);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("n_positions", 0);
  m.ffn_kind = FfnKind::gelu;
  m.norm = NormKind::layernorm;
  m.bias = BiasKind::all;
  m.positional = Positional::learned;
  m.tied_embeddings = r.flag("tie_word_embeddings", true);
  m.dropout = r.real("resid_pdrop", 0.1);
}

void read_gpt_neox(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "gpt-neox";
  m.hidden = r.i64("hidden_size", 0);
  m.layers = r.i32("num_hidden_layers", 0);
  m.heads = r.i32("num_attention_heads", 0);
  m.ffn = r.i64("intermediate_size", 0);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("max_position_embeddings", 0);
  m.ffn_kind = FfnKind::gelu;
  m.norm = NormKind::layernorm;
  m.bias = r.flag("attention_bias", true) ? BiasKind::all : BiasKind::none;
  m.positional = Positional::rope;
  m.rope_fraction = r.real("rotary_pct", 0.25);
  m.parallel_residual = r.flag("use_parallel_residual", true);
  m.tied_embeddings = r.flag("tie_word_embeddings", false);
}

void read_bloom(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "bloom";
  m.hidden = r.any({"hidden_size", "n_embed"});
  m.layers = r.any32({"n_layer", "num_hidden_layers"});
  m.heads = r.any32({"n_head", "num_attention_heads"});
  m.ffn = 4 * m.hidden;  // BloomMLP: dense_h_to_4h
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("seq_length", 2048, false);
  m.ffn_kind = FfnKind::gelu;
  m.norm = NormKind::layernorm;
  m.embedding_norm = true;  // word_embeddings_layernorm
  m.bias = BiasKind::all;
  m.positional = Positional::alibi;
  m.tied_embeddings = r.flag("tie_word_embeddings", true);
}

void read_falcon(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "falcon";
  m.hidden = r.i64("hidden_size", 0);
  m.layers = r.any32({"num_hidden_layers", "n_layer"});
  m.heads = r.any32({"num_attention_heads", "n_head"});
  const bool new_arch = r.flag("new_decoder_architecture", false);
  if (new_arch)
    m.kv_heads = r.i32("num_kv_heads", m.heads, false, 1);
  else if (r.flag("multi_query", true))
    m.kv_heads = 1;
  m.ffn = r.i64("ffn_hidden_size", 4 * m.hidden, false);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("max_position_embeddings", 2048, false);
  m.ffn_kind = FfnKind::gelu;
  m.norm = NormKind::layernorm;
  m.bias = r.flag("bias", false) ? BiasKind::all : BiasKind::none;
  m.positional = r.flag("alibi", false) ? Positional::alibi : Positional::rope;
  m.parallel_residual = r.flag("parallel_attn", true);
  // FalconDecoderLayer: one input_layernorm with parallel attention (old arch), ln_attn + ln_mlp (new arch).
  m.norms_per_layer = new_arch ? 2 : (m.parallel_residual ? 1 : 2);
  m.tied_embeddings = r.flag("tie_word_embeddings", true);
}

void read_mpt(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "mpt";
  m.hidden = r.i64("d_model", 0);
  m.layers = r.i32("n_layers", 0);
  m.heads = r.i32("n_heads", 0);
  m.ffn = r.i64("expansion_ratio", 4, false) * m.hidden;
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("max_seq_len", 2048, false);
  m.ffn_kind = FfnKind::gelu;
  const bool no_bias = r.flag("no_bias", true);
  m.norm = no_bias ? NormKind::layernorm_nobias : NormKind::layernorm;
  m.bias = no_bias ? BiasKind::none : BiasKind::all;
  m.positional = Positional::alibi;
  m.tied_embeddings = true;  // MPT always ties the output to wte
}

void read_t5(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = type;
  m.architecture = Architecture::encoder_decoder;
  m.hidden = r.i64("d_model", 0);
  m.encoder_layers = r.i32("num_layers", 0);
  m.layers = r.i32("num_decoder_layers", m.encoder_layers, false);
  m.heads = r.i32("num_heads", 0);
  m.head_dim = r.i32("d_kv", 0);
  m.ffn = r.i64("d_ff", 0);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("n_positions", 512, false);
  const std::string proj = r.text("feed_forward_proj", "relu");
  m.ffn_kind = proj.rfind("gated-", 0) == 0 ? act_kind(proj, true) : act_kind(proj, false);
  m.norm = NormKind::rmsnorm;  // T5LayerNorm: scale only, no bias
  m.positional = Positional::relative;
  m.relative_buckets = r.i32("relative_attention_num_buckets", 32, false);
  m.tied_embeddings = r.flag("tie_word_embeddings", type == "t5");
  m.dropout = r.real("dropout_rate", 0.1);
}

void read_bert(HfReader& r, [[maybe_unused]] const std::string& type) {
  ModelSpec& m = r.m;
  m.family = "bert";
  m.architecture = Architecture::encoder;
  m.hidden = r.i64("hidden_size", 0);
  m.layers = r.i32("num_hidden_layers", 0);
  m.heads = r.i32("num_attention_heads", 0);
  m.ffn = r.i64("intermediate_size", 0);
  m.vocab = r.i64("vocab_size", 0);
  m.max_context = r.i64("max_position_embeddings", 512, false);
  m.type_vocab = r.i32("type_vocab_size", 2, false);
  m.ffn_kind = FfnKind::gelu;
  m.norm = NormKind::layernorm;
  m.embedding_norm = true;
  m.bias = BiasKind::all;
  m.positional = Positional::learned;
  m.pooler = true;
  m.tied_embeddings = true;
  m.dropout = r.real("hidden_dropout_prob", 0.1);
}

// The config.json model types ftplan reads, each with its reader (transformers' modeling_<type>.py
// names the keys).
const struct HfFamily {
  std::vector<std::string> types;
  void (*read)(HfReader&, const std::string&);
} kHfFamilies[] = {
    {{"llama", "mistral", "mixtral", "qwen2", "gemma2", "phi3"}, read_llama_like},
    {{"gpt2"}, read_gpt2},
    {{"gpt_neox"}, read_gpt_neox},
    {{"bloom"}, read_bloom},
    {{"falcon"}, read_falcon},
    {{"mpt"}, read_mpt},
    {{"t5", "mt5"}, read_t5},
    {{"bert"}, read_bert},
};

std::string hf_supported_types() {
  std::vector<std::string> names;
  for (const auto& f : kHfFamilies) names.insert(names.end(), f.types.begin(), f.types.end());
  return join(names, ", ");
}

}  // namespace

ModelSpec load_hf_config(const std::filesystem::path& path) {
  return parse_hf_config(detail::read_input_file(path), path);
}

ModelSpec parse_hf_config(std::string_view text, const std::filesystem::path& path) {
  YAML::Node root = detail::load_yaml_text(text, path.string());
  Reader reader(path.string());
  ModelSpec m;
  m.name = path.parent_path().filename().string();
  if (m.name.empty()) m.name = path.stem().string();
  if (!root.IsMap()) throw InputError(reader.where(root), "", "expected a JSON object (a Hugging Face config.json)");
  // JSON nulls mean "use the default"; drop them so the getters see them as absent. yaml-cpp's
  // remove(key) compares every key from the map's start, so removing each null by name was
  // quadratic (20,000 keys and 20,000 nulls, 0.56 MB: 13 s; a 16 MiB file, hours; found by
  // fuzz/readers_fuzz.cpp). A few nulls (a real config has a handful) are removed by node, a
  // pointer compare, so the root keeps its mark (the line an error at the root cites); more are
  // dropped in one pass into a new map, which has no mark (such an error then cites no line).
  const auto is_null = [](const auto& kv) { return kv.second.IsNull() && kv.first.IsScalar(); };
  std::vector<YAML::Node> nulls;
  for (const auto& kv : root)
    if (is_null(kv)) nulls.push_back(kv.first);
  if (nulls.size() <= 64) {
    for (const auto& key : nulls) root.remove(key);
  } else {
    YAML::Node kept(YAML::NodeType::Map);
    for (const auto& kv : root)
      if (!is_null(kv)) kept.force_insert(kv.first, kv.second);
    root = kept;
  }

  MapView v = reader.root(root);
  HfReader r{v, m};
  std::string type = r.text("model_type");
  if (type.empty()) {
    v.require("model_type", "the model family (" + hf_supported_types() + ")");
    reader.throw_if_any();
  }
  if (type == "RefinedWebModel" || type == "RefinedWeb") type = "falcon";
  const HfFamily* family = nullptr;
  for (const auto& f : kHfFamilies)
    if (std::find(f.types.begin(), f.types.end(), type) != f.types.end()) family = &f;
  if (family) {
    family->read(r, type);
  } else {
    reader.error(v.location_of("model_type"), "model_type",
                 fmt::format("'{}' is not a model type ftplan imports; supported: {}", type, hf_supported_types()));
  }
  m.display_name = m.name;
  reader.throw_if_any();
  // model::check's findings, at the config.json key the field was read from.
  for (const auto& [key, message] : model::check(m)) {
    const std::string_view hf_key = hf_key_of(v, key);
    if (hf_key.empty())
      reader.error(v.location(), key, message);
    else
      reader.error(v.location_of(hf_key), v.key_path(hf_key), fmt::format("{} (ftplan's model.{})", message, key));
  }
  reader.throw_if_any();
  return m;
}

}  // namespace ftplan::io
