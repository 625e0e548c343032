#include <tuple>

#include "schedule/builder.hpp"

namespace ftplan::schedule::detail {

std::string Builder::micro_name(const std::string& base, int mb) const {
  return micro_batches > 1 ? name("{} m{}", base, mb) : base;
}

int Builder::copy_out(int layer, int mb, Pass pass, int gathered, int buffer) {
  if (!sharded_units || sharding != plan::Sharding::fsdp2) return gathered;
  Op op = make_op(OpKind::elementwise, Stream::compute, pass,
                  micro_name(name("{} L{} all-gather copy-out", pass == Pass::forward ? "fwd" : "bwd", layer), mb),
                  layer, mb);
  op.bytes = 2.0 * unit_bytes;  // read the gathered buffer, write the parameters
  op.deps = {gathered};
  op.reads = {buffer};
  op.writes = {buffer};
  return add(std::move(op));
}

int Builder::reduce_copy_in(int layer, int mb, int& cur) {
  if (!sharded_units && !gathered_for_step) return cur;
  // Gradients come out of autograd in the gathered parameters' type; gathered for the step,
  // they were accumulated in the reduce type (accumulate_unsharded).
  const double a = gathered_for_step ? grad_reduce_B : inv_.recipe.gather_B;
  Op op = make_op(OpKind::elementwise, Stream::compute, Pass::backward, "", layer, mb);
  op.deps = {cur};
  switch (sharding) {
    case plan::Sharding::fsdp2:
      op.name = micro_name(name("bwd L{} reduce-scatter copy-in", layer), mb);
      op.bytes = grad_params * (a + grad_reduce_B);
      cur = add(std::move(op));
      return cur;
    case plan::Sharding::fsdp1: {
      op.name = micro_name(name("bwd L{} flat gradient cat", layer), mb);
      op.bytes = 2.0 * grad_params * a;
      cur = add(std::move(op));
      Op div = make_op(OpKind::elementwise, Stream::comm_reduce, Pass::backward,
                       micro_name(name("bwd L{} gradient pre-divide", layer), mb), layer, mb);
      div.bytes = 2.0 * grad_params * grad_reduce_B;
      div.deps = {cur};
      return add(std::move(div));
    }
    case plan::Sharding::deepspeed:
      op.stream = Stream::comm_reduce;
      op.name = micro_name(name("bwd L{} gradient flatten and pre-divide", layer), mb);
      op.bytes = 4.0 * grad_params * a;  // cat: read + write; div_: read + write
      op.kernels = 2;
      return add(std::move(op));
    default: return cur;
  }
}

int Builder::fetch(int layer, int mb, bool backward, int release_before, int after, int& buffer) {
  const std::string what = name("L{}{}{}", layer, backward ? " bwd" : "", micro_batches > 1 ? name(" m{}", mb) : "");
  buffer = tensor("params " + what, Category::temporaries, Tier::gpu, unit_bytes, layer, unit_group->element);
  Ids deps;
  if (release_before >= 0) deps.push_back(release_before);
  // The buffers are one pool of `units_in_flight` for the whole step, as an engine's bounded
  // prefetch holds them: a fetch takes the buffer the fetch `units_in_flight` before it freed,
  // across passes and micro-batches too (`release_before` only bounds a pass from within; the
  // executor, exec/, ran the NVMe reads of the next pass ahead past the simulated peak).
  take_slot(fetch_buffers, units_in_flight, buffer, deps);
  return stream_in(buffer, unit_bytes, what, layer, mb, std::move(deps), after);
}

int Builder::stream_in(int buffer, double bytes, const std::string& what, int layer, int mb, Ids deps, int after) {
  // The fetch reads the weights, allocated on the compute stream: it runs on another stream, so
  // it must wait for that allocation (the executor, exec/, found fetches racing ahead of it).
  if (weights_alloc >= 0) deps.push_back(weights_alloc);
  const Stream first_stream =
      param_tier == Tier::gpu ? Stream::comm : (param_tier == Tier::nvme ? Stream::nvme_read : Stream::h2d);
  int last = alloc(first_stream, buffer, deps);
  const double shard_bytes = bytes / std::max(1, shard);
  int source = weights_tensor;
  if (param_tier == Tier::nvme) {
    // ZeRO-Infinity / aiDAPTIV: read the layer's shard from flash into a pinned host buffer.
    const int staging =
        tensor("staging " + what, Category::buffers, Tier::cpu, shard_bytes, layer, unit_group->element);
    alloc(Stream::nvme_read, staging, {last});
    last = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, shard_bytes, "nvme read params " + what, layer, mb, {last},
                {weights_tensor}, {staging});
    const int h2d = copy(Stream::h2d, Tier::cpu, Tier::gpu, shard_bytes, "h2d params " + what, layer, mb, {last},
                         {staging}, {buffer});
    last = release(Stream::h2d, staging, {h2d});
    source = buffer;
  } else if (plan::host_memory(param_tier)) {
    last = copy(Stream::h2d, param_tier, Tier::gpu, shard_bytes, "h2d params " + what, layer, mb, {last},
                {weights_tensor}, {buffer});
    source = buffer;
  }
  if (per_parameter && layer >= 0) {
    // Each tensor: torch.cuda.synchronize() first (DeepSpeed issue #1069; PR #1188: "the async
    // version is not async at all, because each all_gather calls torch.cuda.synchronize()"), so
    // it waits for the compute issued before it; then torch.distributed.all_gather into a
    // list of world-size views, whose NCCL backend copies the flat result back into each view
    // (torch ProcessGroupNCCL::allgather): a host launch per rank. Fixed host cost per call:
    // what #1069 measured on one 8-GPU node (pre-launch 130 us + launch 250 us), less its 8
    // per-rank launches, which `kernels` counts for every group size.
    const std::vector<double> shares = parameter_tensor_shares(layer);
    for (std::size_t t = 0; t < shares.size(); ++t) {
      last = collective(Stream::comm, Collective::all_gather, Group::dp, shard, bytes * shares[t],
                        name("all-gather {} p{}", what, t), layer, mb, {last, after});
      ir_.ops[last].host_s = kDeepSpeedPerParameterFetch_s;
      ir_.ops[last].kernels = shard;
      ir_.ops[last].reads = {source};
      ir_.ops[last].writes = {buffer};
    }
  } else if (shard > 1) {  // (the root's modules: one gather each)
    last = collective(Stream::comm, Collective::all_gather, Group::dp, shard, bytes, "all-gather " + what, layer, mb,
                      {last});
    ir_.ops[last].reads = {source};
    ir_.ops[last].writes = {buffer};
  }
  return last;
}

// ZeRO-Infinity's and ZeRO-Offload's parameter offload (offload_param) partitions and fetches
// every module's parameters on use, the embedding and the LM head as the layers (DeepSpeed
// stage3 PartitionedParameterCoordinator.fetch_sub_module from each module's pre-forward hook);
// norms below stage3_param_persistence_threshold (1e5 parameters) stay on the GPU, but the
// final norm is counted with the head's fetch (the inventory keeps no persistent part). Layer
// fetches are sized at the largest layer (the inventory's pool); the root's buffers are their
// own (inventory::kStreamedHead; the embedding's lives only around its lookup). The condition is
// inventory::streams_root_params. Not modelled yet: the root's all-gathers where ZeRO-3 or FSDP
// shard parameters kept on the GPU, and a fetch of the embedding for its backward.
bool Builder::streams_root() const { return stream_params && inventory::streams_root_params(p_, inv_); }

int Builder::fetch_root(const std::string& what, double bytes, int mb, Ids deps, int& buffer) {
  buffer = tensor(micro_name("params " + what, mb), Category::temporaries, Tier::gpu, bytes, -1, unit_group->element);
  return stream_in(buffer, bytes, micro_name(what, mb), -1, mb, std::move(deps), -1);
}

// FSDP2 inside a pipeline stage (Inventory::gathered_for_step, whose sources the inventory
// cites): torchtitan does not reshard after forward under PP and the pipelining stage does not
// reshard after backward, so each FSDP unit of the stage is all-gathered once per step, on the
// first forward that needs it, and kept. The gathers are issued at the step's start on the
// gather stream, in the order the stage's layers first run (FSDP2 prefetches the next unit's
// gather while the current one computes); the root's units (embeddings; final norm and head)
// first.
void Builder::gather_stage() {
  gather_of.assign(layers, -1);
  copied_out_of.assign(layers, -1);
  const double root_bytes = inv_.params.root * inv_.recipe.gather_B;
  if (root_bytes > 0) {
    root_gather = collective(Stream::comm, Collective::all_gather, Group::dp, shard, root_bytes,
                             "all-gather root units (kept for the step)", -1, 0, {last_compute});
    ir_.ops[root_gather].reads = {weights_tensor};
    ir_.ops[root_gather].writes = {stage_params_tensor};
  }
  for (int l = 0; l < layers; ++l) {
    gather_of[l] = collective(Stream::comm, Collective::all_gather, Group::dp, shard, layer_gather_bytes,
                              name("all-gather L{} (kept for the step)", layer_of[l]), layer_of[l], 0, {last_compute});
    ir_.ops[gather_of[l]].reads = {weights_tensor};
    ir_.ops[gather_of[l]].writes = {stage_params_tensor};
  }
}

// What layer l's compute waits for: the first time, its gather and FSDP2's copy-out of the
// gathered buffer into the parameters (on the compute stream: foreach_all_gather_copy_out);
// afterwards nothing (the parameters stay gathered).
int Builder::stage_params_ready(int l, int mb) {
  if (copied_out_of[l] >= 0) return copied_out_of[l];
  Op op = make_op(OpKind::elementwise, Stream::compute, Pass::forward,
                  micro_name(name("fwd L{} all-gather copy-out", layer_of[l]), mb), layer_of[l], mb);
  op.bytes = 2.0 * layer_gather_bytes;  // read the gathered buffer, write the parameters
  op.deps = {gather_of[l], last_compute};
  if (root_gather >= 0) op.deps.push_back(root_gather);
  op.reads = {stage_params_tensor};
  op.writes = {stage_params_tensor};
  copied_out_of[l] = add(std::move(op));
  return copied_out_of[l];
}

// A micro-batch's unsharded gradients of layer l join the accumulated ones in the reduce type,
// when that differs from the gathered parameters' (FSDP2 FSDPParam.to_accumulated_grad_if_needed:
// the first time a cast, .to(reduce_dtype); then accumulate_unsharded_grad_if_needed: +=), on the
// compute stream. Returns the op after which the layer's backward is done.
int Builder::accumulate_unsharded(int l, int mb, int cur) {
  const double a = inv_.recipe.gather_B;
  if (grad_reduce_B == a || grad_params <= 0) return cur;
  const bool first = backwards[l] == 1;
  Op op = make_op(OpKind::elementwise, Stream::compute, Pass::backward,
                  micro_name(name("bwd L{} unsharded gradient {}", layer_of[l], first ? "cast" : "accumulate"), mb),
                  layer_of[l], mb);
  op.bytes = grad_params * (a + (first ? 1.0 : 2.0) * grad_reduce_B);
  op.deps = {cur};
  if (unsharded_grads_tensor >= 0) {
    op.reads = {unsharded_grads_tensor};
    op.writes = {unsharded_grads_tensor};
  }
  return add(std::move(op));
}

std::int64_t Builder::pipe_tag(int mb, int to_vs, bool gradient) const {
  return (static_cast<std::int64_t>(mb) * virtual_stages + to_vs) * 2 + (gradient ? 1 : 0);
}

void Builder::receive(int mb, int from_vs, int vs, bool gradient) {
  Op op = make_op(OpKind::marker, Stream::compute, gradient ? Pass::backward : Pass::forward,
                  micro_name(name("recv {} from stage {}", gradient ? "gradient" : "activation", from_vs % pp), mb), -1,
                  mb);
  op.peer = from_vs % pp;
  op.tag = pipe_tag(mb, vs, gradient);
  op.deps = {last_compute};
  last_compute = add(std::move(op));
}

void Builder::send(int mb, int to_vs, bool gradient) {
  const int s =
      collective(Stream::p2p, Collective::send_recv, Group::pp, 2, p2p_bytes,
                 micro_name(name("send {} to stage {}", gradient ? "gradient" : "activation", to_vs % pp), mb), -1, mb,
                 {last_compute});
  ir_.ops[s].peer = to_vs % pp;
  ir_.ops[s].tag = pipe_tag(mb, to_vs, gradient);
}

void Builder::forward(int mb, int chunk) {
  std::vector<int>& saved = saved_of[mb];
  const int c0 = chunk_begin[chunk], c1 = chunk_begin[chunk + 1], vs = chunk * pp + stage;
  if (vs > 0) receive(mb, vs - 1, vs, false);
  std::vector<int>& released = scratch_[0];  // a pass's scratch, kept: no allocation per pass
  released.assign(static_cast<std::size_t>(layers), -1);
  // Folded runs (StepIR::fold): nothing outside waits on a layer's inner ops here.
  const bool fold = fold_on() && !stream_params && !gathered_for_step && !offloaded_group;
  FoldRun run;
  int run_template = -1;  // the template the open run replays; -1: none open
  for (int l = c0; l < c1; ++l) {
    const int layer = layer_of[l];
    const std::size_t first_op = ir_.ops.size();
    Ids deps = {last_compute};
    Ids reads;
    int buffer = -1, embedding = -1;
    if (layer == 0 && streams_root() && model::embedding_params(m_) > 0) {
      deps.push_back(fetch_root("embedding",
                                static_cast<double>(model::embedding_params(m_)) / tp_ * inv_.recipe.compute_B, mb, {},
                                embedding));
      reads.push_back(embedding);
    }
    if (stream_params) {
      const int before = l - c0 >= units_in_flight ? released[l - units_in_flight] : -1;
      const int gathered = fetch(layer, mb, false, before, last_compute, buffer);
      deps.push_back(copy_out(layer, mb, Pass::forward, gathered, buffer));
      reads.push_back(buffer);
    } else if (gathered_for_step) {
      deps.push_back(stage_params_ready(l, mb));
      reads.push_back(stage_params_tensor);
    } else if (weights_tensor >= 0) {
      reads.push_back(weights_tensor);
    }
    const TensorGroup* acts = saved_group;
    if (acts) {
      saved[l] = tensor(micro_name(name("saved activations L{}", layer), mb), Category::activations, Tier::gpu,
                        acts->bytes, layer);
      Ids slot = {last_compute};
      if (offloaded_group) take_slot(activation_stash, activation_slots(), saved[l], slot);
      deps.push_back(alloc(Stream::compute, saved[l], slot));
    }
    // Whether layer l + 1 replays template t as layer l does (the same inputs and allocations).
    const auto next_replays = [&](int t) {
      return l + 1 < c1 && template_index(layer_of[l + 1], Pass::forward, deps, reads, saved[l]) == t;
    };
    bool continues = false;
    if (run_template >= 0) {  // a later layer of the open run
      continues = next_replays(run_template);
      last_compute = fold_replay(templates_[static_cast<std::size_t>(run_template)], layer, mb, deps, reads, saved[l],
                                 !continues, run.chain_end);
      ++run.layers;
    } else {
      last_compute = layer_forward(layer, mb, Pass::forward, deps, reads, saved[l]);
      const int t = fold ? template_index(layer, Pass::forward, deps, reads, saved[l]) : -1;
      if (t >= 0 && templates_[static_cast<std::size_t>(t)].serial && ir_.ops[first_op].stream == Stream::compute &&
          next_replays(t)) {
        run = {first_op, last_compute, 0, 1};
        run_template = t;
        continues = true;
      }
    }
    if (run_template >= 0 && !continues) {
      run.end = ir_.ops.size();
      fold_runs_.push_back(run);
      run_template = -1;
    }
    if (buffer >= 0) last_compute = release(Stream::compute, buffer, {last_compute});
    if (embedding >= 0) last_compute = release(Stream::compute, embedding, {last_compute});
    released[l] = last_compute;
    if (offloaded_group && saved[l] >= 0) offload_activations(l, layer, mb);
  }
  if (vs == virtual_stages - 1 && m_.has_lm_head()) head_and_loss(mb);
  if (vs < virtual_stages - 1) send(mb, vs + 1, false);
}

// long: the layer loop carries the open fold run (its templates and chain) from one layer to the
// next and closes it where a layer differs; split, that state would become members.
void Builder::backward(int mb, int chunk) {
  std::vector<int>& saved = saved_of[mb];
  std::vector<int>& host_saved = host_saved_of[mb];
  const int c0 = chunk_begin[chunk], c1 = chunk_begin[chunk + 1], vs = chunk * pp + stage;
  if (vs < virtual_stages - 1) receive(mb, vs + 1, vs, true);
  std::vector<int>& released_bwd = scratch_[0];  // a pass's scratch, kept: no allocation per pass
  std::vector<int>& fetched = scratch_[1];
  std::vector<int>& fetched_buffer = scratch_[2];
  for (auto* v : {&released_bwd, &fetched, &fetched_buffer}) v->assign(static_cast<std::size_t>(layers), -1);
  const auto fetch_backward = [&](int l) {
    const int back = l + units_in_flight;
    const int before = back < c1 ? released_bwd[back] : -1;
    fetched[l] = fetch(layer_of[l], mb, true, before, last_compute, fetched_buffer[l]);
  };
  // Folded runs (StepIR::fold): nothing outside waits on a layer's inner ops when no gradient
  // is reduced or offloaded per layer in this pass and the recompute, if any, is a layer template.
  const bool grads_gpu = !grads_group || grads_group->tier == Tier::gpu;
  const bool reduces = any_dp && (reduce_each_micro || backwards[c1 - 1] + 1 == micro_batches);
  const bool fold = fold_on() && !stream_params && !gathered_for_step && !offloaded_group && grads_gpu && !reduces &&
                    !(job_.checkpointing == Checkpointing::selective &&
                      inv_.profile.selective == plan::FrameworkProfile::Selective::every_other_mm);
  FoldRun run;
  int run_template = -1, run_recompute = -1;  // the open run's backward and recompute templates; -1: none open
  for (int l = c1 - 1; l >= c0; --l) {
    const int layer = layer_of[l];
    const std::size_t first_op = ir_.ops.size();
    const bool first_backward = backwards[l] == 0;
    const bool last_backward = ++backwards[l] == micro_batches;
    Ids deps = {last_compute};
    Ids reads;
    int buffer = -1;
    if (stream_params) {
      if (fetched[l] < 0) fetch_backward(l);
      buffer = fetched_buffer[l];
      deps.push_back(copy_out(layer, mb, Pass::backward, fetched[l], buffer));
      reads.push_back(buffer);
      // Backward prefetch (FSDP1 BACKWARD_PRE, FSDP2's and DeepSpeed's prefetch of the next
      // module): the next layer's gather is issued before this layer's gradients are reduced,
      // so on the process group's one stream it is not queued behind that reduce-scatter. It
      // takes the buffer of the layer `units_in_flight` above, already released.
      if (l > c0 && units_in_flight >= 2 && !per_parameter) fetch_backward(l - 1);
    } else if (gathered_for_step) {
      reads.push_back(stage_params_tensor);
    } else if (weights_tensor >= 0) {
      reads.push_back(weights_tensor);
    }
    if (host_saved[l] >= 0) deps.push_back(activations_back(l, layer, mb));
    if (saved[l] >= 0) reads.push_back(saved[l]);
    Ids bwd_tensors;  // inline: no allocation per layer
    for (const auto* g : backward_groups) {
      bwd_tensors.push_back(
          tensor(name("{} L{}", g->name, layer), g->category, g->tier, g->total(), layer, g->element));
      deps.push_back(alloc(Stream::compute, bwd_tensors.back(), {last_compute}));
    }
    const bool grads_on_gpu = grads_group && grads_group->tier == Tier::gpu;
    if (first_backward && grads_on_gpu && grad_tensor[l] >= 0)
      deps.push_back(alloc(Stream::compute, grad_tensor[l], {last_compute}));
    // The templates layer l's backward replays (its recompute's, -1 without one) and whether layer
    // `next` replays the same with the same allocations.
    const auto templates_of = [&](int at) {
      const int lay = layer_of[at];
      const int rec = job_.checkpointed(at) ? template_index(lay, Pass::recompute, deps, reads, -1) : -1;
      return std::pair{template_index(lay, Pass::backward, Ids{0}, reads, -1), rec};
    };
    const auto same_allocations = [&](int a, int b) {
      if (job_.checkpointed(a) != job_.checkpointed(b)) return false;
      if (!(first_backward && grads_on_gpu)) return true;
      if ((grad_tensor[a] >= 0) != (grad_tensor[b] >= 0)) return false;
      if (grad_tensor[a] < 0) return true;
      const Tensor &x = ir_.tensors[grad_tensor[a]], &y = ir_.tensors[grad_tensor[b]];
      return x.bytes == y.bytes && x.tier == y.tier && x.category == y.category;
    };
    const auto next_replays = [&](std::pair<int, int> t) {
      const bool serial =
          t.first >= 0 && templates_[static_cast<std::size_t>(t.first)].serial &&
          (t.second >= 0 ? templates_[static_cast<std::size_t>(t.second)].serial : !job_.checkpointed(l));
      return serial && l - 1 >= c0 && same_allocations(l, l - 1) && templates_of(l - 1) == t;
    };
    int cur;
    bool continues = false;
    if (run_template >= 0) {  // a later layer of the open run: its recompute and backward left out
      continues = next_replays({run_template, run_recompute});
      if (run_recompute >= 0)
        fold_replay(templates_[static_cast<std::size_t>(run_recompute)], layer, mb, deps, reads, -1, false,
                    run.chain_end);
      cur = fold_replay(templates_[static_cast<std::size_t>(run_template)], layer, mb, {run.chain_end}, reads, -1,
                        false, run.chain_end);
      ++run.layers;
    } else {
      cur = backward_ready(layer, mb, deps, reads, l);
      cur = layer_backward(layer, mb, {cur}, reads);
      if (grads_on_gpu && grad_tensor[l] >= 0) ir_.ops[cur].writes.push_back(grad_tensor[l]);
    }
    if (saved[l] >= 0) cur = release(Stream::compute, saved[l], {cur});
    for (int t : bwd_tensors) cur = release(Stream::compute, t, {cur});
    if (buffer >= 0) cur = release(Stream::compute, buffer, {cur});
    if (gathered_for_step) cur = accumulate_unsharded(l, mb, cur);
    released_bwd[l] = cur;
    last_compute = cur;
    if (fold && run_template < 0 && ir_.ops[first_op].stream == Stream::compute) {
      const std::pair<int, int> t = templates_of(l);
      if (next_replays(t)) {
        run = {first_op, cur, 0, 1};  // its first layer ends with its last free
        std::tie(run_template, run_recompute) = t;
        continues = true;
      }
    }
    if (run_template >= 0 && !continues) {
      run.end = ir_.ops.size();
      fold_runs_.push_back(run);
      run_template = -1;
    }
    if (gathered_for_step) continue;  // reduced after the chunk's last backward, below
    const int produced = reduce_gradients(layer, mb, last_backward, cur);
    if (grads_group && !grads_on_gpu && last_backward) offload_gradients(l, layer, mb, produced);
  }
  // FSDP2 inside a pipeline stage: after the chunk's last backward the pipelining stage calls
  // post_backward on each FSDP group (stage.py _post_backward; the multi-stage schedules'
  // REDUCE_GRAD action once a stage has run all its micro-batches' backwards): the unsharded
  // gradients are reduce-scattered then, none of them overlapping this chunk's backward.
  if (gathered_for_step && backwards[c0] == micro_batches)
    for (int l = c1 - 1; l >= c0; --l) {
      int cur = last_compute;
      reduce_gradients(layer_of[l], mb, true, cur);
    }
  if (vs > 0) send(mb, vs - 1, true);
}

// Offloaded activations come back before their layer's backward: flash -> pinned host -> GPU,
// or host -> GPU. Returns the op after which they are on the GPU (saved_of[mb][l]).
int Builder::activations_back(int l, int layer, int mb) {
  std::vector<int>& saved = saved_of[mb];
  std::vector<int>& host_saved = host_saved_of[mb];
  const std::string what = micro_name(name("activations L{}", layer), mb);
  saved[l] = tensor(what + " (back)", Category::activations, Tier::gpu, offloaded_group->bytes, layer);
  Ids slot = {stash_done_of[mb][l]};
  take_slot(activation_stash, activation_slots(), saved[l], slot);
  int a = alloc(Stream::h2d, saved[l], slot);
  if (offloaded_group->tier == Tier::nvme) {
    const int staging = tensor("staging back " + what, Category::buffers, Tier::cpu, offloaded_group->bytes, layer);
    alloc(Stream::nvme_read, staging, {a});
    a = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, offloaded_group->bytes, "nvme read " + what, layer, mb, {a},
             {host_saved[l]}, {staging});
    a = copy(Stream::h2d, Tier::cpu, Tier::gpu, offloaded_group->bytes, "h2d " + what, layer, mb, {a}, {staging},
             {saved[l]});
    a = release(Stream::h2d, staging, {a});
  } else {
    a = copy(Stream::h2d, offloaded_group->tier, Tier::gpu, offloaded_group->bytes, "h2d " + what, layer, mb, {a},
             {host_saved[l]}, {saved[l]});
  }
  a = release(Stream::h2d, host_saved[l], {a});
  return a;
}

// What a layer's backward waits for: its forward recomputed (checkpointed layers), the
// unsaved part recomputed (torchtitan's op-level selective checkpointing), or a join of `deps`.
int Builder::backward_ready(int layer, int mb, const Ids& deps, const Ids& reads, int l) {
  int cur;
  if (job_.checkpointed(l)) {
    cur = layer_forward(layer, mb, Pass::recompute, deps, reads, -1);
  } else if (job_.checkpointing == Checkpointing::selective &&
             inv_.profile.selective == plan::FrameworkProfile::Selective::every_other_mm) {
    // torchtitan op-SAC (torchtitan/models/llama3/parallelize: _get_custom_policy) saves only
    // the outputs of ops in its save list (matmuls, SDPA, reduce-scatter, max), and of the
    // matmuls every other one, so backward recomputes the unsaved matmuls (wk, wo, w3) and
    // every other forward op: the norms, RoPE, residual adds and the activation.
    const LayerWork w = work_of(layer);
    Op ew = make_op(OpKind::elementwise, Stream::compute, Pass::recompute, name("re L{} pointwise", layer), layer, mb);
    ew.bytes = pointwise_bytes(w, false) * tokens_ + activation_bytes(w, false) * tokens_ * w.experts_per_token;
    ew.kernels = pointwise_kernels(false) + (w.gated ? 2 : 1);
    ew.deps = deps;
    ew.reads = reads;
    cur = add(std::move(ew));
    cur = gemm(name("re L{} unsaved mm", layer), layer, mb, Pass::recompute, tokens_, w.h,
               w.kv + w.h + w.f * w.experts_per_token, false, {cur});
  } else {
    Op join;
    join.kind = OpKind::marker;
    join.stream = Stream::compute;
    join.name = name("bwd L{} ready", layer);
    join.deps = deps;
    cur = add(std::move(join));
  }
  return cur;
}

// Gradient reduction of this layer: every micro-batch when gradients are sharded
// (FSDP/ZeRO-2/3 reduce-scatter), else once after the last micro-batch (DDP no_sync,
// ZeRO-1, Megatron) as an all-reduce (DDP buckets) or reduce-scatter (distributed optimizer).
// Returns the op the layer's gradients are ready after (`cur`, updated when the framework's
// copy runs on the compute stream, when none is reduced now).
int Builder::reduce_gradients(int layer, int mb, bool last_backward, int& cur) {
  if (!any_dp || !(reduce_each_micro || last_backward)) return cur;
  const bool scatter = inv_.zero >= 1 || stream_params;
  // FSDP, ZeRO-3 and YaFSDP gather parameters and reduce-scatter gradients through one
  // process group: NCCL runs a communicator's collectives one after another in issue order
  // (PyTorch FSDP2 added a separate reduce-scatter process group to lift exactly this), so
  // the reduce-scatter queues behind the gathers on the gather stream.
  const Stream reduce_stream = stream_params && shard > 1 ? Stream::comm : Stream::comm_reduce;
  const int ready = reduce_copy_in(layer, mb, cur);
  last_compute = cur;
  last_reduce =
      collective(reduce_stream, scatter ? Collective::reduce_scatter : Collective::all_reduce, Group::dp,
                 shard > 1 ? shard : grad_group, layer_grad_bytes,
                 micro_name(name("{} L{}", scatter ? "reduce-scatter" : "all-reduce", layer), mb), layer, mb, {ready});
  ir_.ops[last_reduce].element = inv_.element_of(grad_reduce_B);
  // Hybrid sharding (FSDP HYBRID_SHARD, FSDP2 over a 2-D mesh): each shard group sits in a
  // node and its replicas across nodes all-reduce the reduced shard, the second collective
  // (torch distributed/fsdp/_runtime_utils.py _reduce_grad: reduce_scatter, then
  // all_reduce over _inter_node_pg; FSDP2 _fsdp_collectives.py foreach_reduce:
  // all_reduce over the replicate group).
  if (shard > 1 && shard < grad_group) {
    last_reduce = collective(reduce_stream, Collective::all_reduce, Group::replicate, grad_group / shard,
                             layer_grad_bytes / shard, micro_name(name("replica all-reduce L{}", layer), mb), layer, mb,
                             {last_reduce});
    ir_.ops[last_reduce].element = inv_.element_of(grad_reduce_B);
  }
  return last_reduce;
}

// ZeRO-Offload / Infinity: the reduced gradient partition goes to host memory as fp32
// (Ren et al. 2021, sec. 4.1), and on to flash when gradients live there. It crosses PCIe already
// upcast: DeepSpeed casts on the GPU, then copies without blocking (stage_1_and_2.py,
// async_inplace_copy_grad_to_fp32_buffer_from_gpu: src_tensor.float(), copy_(non_blocking=True);
// stage3.py, partition_grads: grad_buffer.to(master_weights_and_grads_dtype), non_blocking=True),
// and a non-blocking copy that changes dtype converts on the GPU anyway (PyTorch
// aten/src/ATen/native/cuda/Copy.cu, copy_kernel_cuda); FSDP casts to the parameter dtype before
// _offload_grad. So each layer's copy moves its share of the host gradients, in their element:
// 4 B per parameter, the embedding's and output layer's shares included (the executor's counts
// found 2.5x the bytes this copy had charged at 2 B per parameter of the layer alone).
void Builder::offload_gradients(int l, int layer, int mb, int produced) {
  const Tensor& host = ir_.tensors[static_cast<std::size_t>(grad_tensor[l])];
  const double bytes = host.bytes;
  if (host.element == Element::fp32 && inv_.compute_element() != Element::fp32) {
    // The host keeps fp32 gradients (Ren et al. 2021 sec. 4.1): DeepSpeed upcasts each 16-bit
    // gradient on the GPU before its non-blocking copy (stage_1_and_2.py
    // async_inplace_copy_grad_to_fp32_buffer_from_gpu: src_tensor.float(); stage3.py
    // partition_grads: grad_buffer.to(fp32)), a kernel reading 16 bits and writing 32 per element.
    Op up =
        make_op(OpKind::elementwise, Stream::compute, Pass::backward, name("upcast gradients L{}", layer), layer, mb);
    up.bytes = static_cast<double>(host.elements) * (inventory::element_bytes(inv_.compute_element()) + 4.0);
    up.element = Element::fp32;
    up.upcasts_gradients = true;
    up.deps = {produced};
    produced = add(std::move(up));
  }
  int t = alloc(Stream::d2h, grad_tensor[l], {produced});
  if (grads_group->tier == Tier::nvme) {
    const int staging =
        tensor(name("staging gradients L{}", layer), Category::buffers, Tier::cpu, bytes, layer, Element::fp32);
    alloc(Stream::d2h, staging, {t});
    t = copy(Stream::d2h, Tier::gpu, Tier::cpu, bytes, name("d2h gradients L{}", layer), layer, mb, {t}, {}, {staging});
    t = copy(Stream::nvme_write, Tier::cpu, Tier::nvme, bytes, name("nvme write gradients L{}", layer), layer, mb, {t},
             {staging}, {grad_tensor[l]});
    t = release(Stream::nvme_write, staging, {t});
  } else {
    t = copy(Stream::d2h, Tier::gpu, grads_group->tier, bytes, name("d2h gradients L{}", layer), layer, mb, {t}, {},
             {grad_tensor[l]});
  }
  last_grad_offload = t;
}

// Activation offload (SSDTrain, DeepSpeed cpu_checkpointing): copy the saved tensors out
// and free the GPU copy once it has left.
void Builder::offload_activations(int l, int layer, int mb) {
  std::vector<int>& saved = saved_of[mb];
  std::vector<int>& host_saved = host_saved_of[mb];
  const TensorGroup* acts = saved_group;
  const std::string what = micro_name(name("activations L{}", layer), mb);
  host_saved[l] = tensor(what + " (offloaded)", Category::activations, offloaded_group->tier, acts->bytes, layer);
  int a = alloc(Stream::d2h, host_saved[l], {last_compute});
  const Tier dst = offloaded_group->tier;
  if (dst == Tier::nvme) {
    const int staging = tensor("staging " + what, Category::buffers, Tier::cpu, acts->bytes, layer);
    alloc(Stream::d2h, staging, {a});
    a = copy(Stream::d2h, Tier::gpu, Tier::cpu, acts->bytes, "d2h " + what, layer, mb, {a}, {saved[l]}, {staging});
    a = copy(Stream::nvme_write, Tier::cpu, Tier::nvme, acts->bytes, "nvme write " + what, layer, mb, {a}, {staging},
             {host_saved[l]});
    a = release(Stream::nvme_write, staging, {a});
  } else {
    a = copy(Stream::d2h, Tier::gpu, dst, acts->bytes, "d2h " + what, layer, mb, {a}, {saved[l]}, {host_saved[l]});
  }
  stash_done_of[mb][l] = release(Stream::d2h, saved[l], {a});
  saved[l] = -1;
}

// The last virtual stage: the LM head, the loss and the head's backward, with the loss's
// temporaries (the inventory's loss groups).
void Builder::head_and_loss(int mb) {
  std::vector<int> loss_tensors, peak;
  int head_fetched = -1, head_buffer = -1;
  for (const auto* g : loss_groups) {
    if (std::string_view(g->name) == inventory::kStreamedHead) {  // fetched (streams_root), its tensor its own
      head_fetched = fetch_root("head", g->total(), mb, {}, head_buffer);
      loss_tensors.push_back(head_buffer);
      continue;
    }
    loss_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
    last_compute = alloc(Stream::compute, loss_tensors.back(), {last_compute});
  }
  if (head_fetched >= 0) {
    Op ready = make_op(OpKind::marker, Stream::compute, Pass::forward, micro_name("head parameters ready", mb), -1, mb);
    ready.deps = {last_compute, head_fetched};
    last_compute = add(std::move(ready));
  }
  for (const auto* g : loss_peak_groups) {
    peak.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
    last_compute = alloc(Stream::compute, peak.back(), {last_compute});
  }
  const double V = static_cast<double>(m_.vocab) / tp_;
  if (inventory::autocast_casts_weights(inv_.recipe, job_)) {  // the LM head's weight cast (see layer_forward)
    Op cast = make_op(OpKind::elementwise, Stream::compute, Pass::forward, micro_name("autocast head weight cast", mb),
                      -1, mb);
    cast.bytes = V * static_cast<double>(m_.hidden) * (4.0 + w_B_);
    cast.deps = {last_compute};
    last_compute = add(std::move(cast));
  }
  last_compute = gemm(micro_name("fwd head", mb), -1, mb, Pass::forward, tokens_, static_cast<double>(m_.hidden), V,
                      false, {last_compute});
  if (head_buffer >= 0) ir_.ops[last_compute].reads = {head_buffer};
  Op loss;
  loss.kind = OpKind::loss;
  loss.stream = Stream::compute;
  loss.pass = Pass::forward;
  loss.name = micro_name("loss", mb);
  loss.micro = mb;
  loss.bytes = tokens_ * V * (act_B_ + 4 + 4 + 4 + 4 + act_B_);  // upcast, log-softmax, its gradient
  loss.kernels = 6;
  loss.deps = {last_compute};
  last_compute = add(std::move(loss));
  for (int t : peak) last_compute = release(Stream::compute, t, {last_compute});
  last_compute = gemm(micro_name("bwd head", mb), -1, mb, Pass::backward, tokens_, static_cast<double>(m_.hidden), V,
                      full_, {last_compute});
  if (head_buffer >= 0) ir_.ops[last_compute].reads = {head_buffer};
  for (int t : loss_tensors) last_compute = release(Stream::compute, t, {last_compute});
}

}  // namespace ftplan::schedule::detail
