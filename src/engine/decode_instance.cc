#include "engine/decode_instance.h"

#include <algorithm>

namespace kvpool::engine {
namespace {

connector::PagedKvLayout DecodeLayout(const connector::KvModelSpec& spec) {
  connector::PagedKvLayout l;
  l.kind = spec.layout;
  l.num_layers = spec.total_layers();
  l.block_tokens = spec.block_tokens;
  l.bytes_per_token_per_layer = spec.bytes_per_token_per_layer;
  return l;
}

}  // namespace

DecodeInstance::DecodeInstance(int index, const DeploymentContext& ctx)
    : index_(index),
      ctx_(ctx),
      token_map_{ctx.geometry->decode_dcp_ranks, ctx.geometry->decode_dcp_interleave},
      blocks_per_rank_(ctx.geometry->decode_kv_tokens / ctx.geometry->decode_dcp_ranks /
                       ctx.geometry->spec.block_tokens),
      gate_(blocks_per_rank_ * ctx.geometry->spec.block_tokens * ctx.geometry->decode_dcp_ranks) {}

Result<std::unique_ptr<DecodeInstance>> DecodeInstance::Create(int index, const DeploymentContext& ctx) {
  std::unique_ptr<DecodeInstance> d(new DecodeInstance(index, ctx));
  for (uint32_t r = 0; r < d->token_map_.ranks; ++r) {
    auto memory = NewKvCacheMemory(DecodeLayout(ctx.ns->spec()), d->blocks_per_rank_,
                                   ctx.devices.DecodeRank(index, r, d->token_map_.ranks));
    if (!memory.ok()) return memory.status();
    d->ranks_.push_back({std::move(memory).value(), std::make_unique<GpuPrefixCache>(d->blocks_per_rank_)});
  }
  return d;
}

uint64_t DecodeInstance::GateTokens(uint64_t tokens) const {
  const uint32_t block = ctx_.geometry->spec.block_tokens;
  const uint64_t fullest = token_map_.CountBelow(0, tokens);  // rank 0 holds the most
  return (fullest + block - 1) / block * block * token_map_.ranks;
}

Result<std::vector<std::vector<connector::BlockId>>> DecodeInstance::AllocateBlocks(uint64_t tokens) {
  const uint32_t block = ctx_.geometry->spec.block_tokens;
  std::vector<std::vector<connector::BlockId>> tables;
  for (uint32_t r = 0; r < token_map_.ranks; ++r) {
    auto blocks = ranks_[r].blocks->AllocateBlocks((token_map_.CountBelow(r, tokens) + block - 1) / block);
    if (!blocks.ok()) {
      ReleaseBlocks(tables);
      return blocks.status();
    }
    tables.push_back(std::move(blocks).value());
  }
  return tables;
}

void DecodeInstance::ReleaseBlocks(const std::vector<std::vector<connector::BlockId>>& tables) {
  for (size_t r = 0; r < tables.size(); ++r) ranks_[r].blocks->Release(tables[r]);
}

void DecodeInstance::NoteUtilisation() {
  const double share = double(gate_.reserved()) / double(gate_.capacity());
  peak_utilisation_ = std::max(peak_utilisation_, share);
  if (!utilisation_.empty() && utilisation_.back().first == ctx_.sim->now()) {
    utilisation_.back().second = share;
  } else {
    utilisation_.emplace_back(ctx_.sim->now(), share);
  }
}

double DecodeInstance::MeanKvUtilisation(double from, double to) const {
  if (to <= from) return 0;
  double area = 0;
  for (size_t i = 0; i < utilisation_.size(); ++i) {
    const double start = std::max(from, utilisation_[i].first);
    const double end = std::min(to, i + 1 < utilisation_.size() ? utilisation_[i + 1].first : to);
    if (end > start) area += (end - start) * utilisation_[i].second;
  }
  return area / (to - from);
}

void DecodeInstance::Add(InFlightRequest* r) {
  r->record.decode_instance = index_;
  running_.push_back(r);
  if (!stepping_) Step();
}

void DecodeInstance::Step() {
  if (running_.empty()) return;
  uint64_t context = 0;
  for (const InFlightRequest* r : running_) context += r->tokens.size() + r->generated;
  const size_t batch = running_.size();  // requests added during the step join the next one
  stepping_ = true;
  ++steps_;
  ctx_.sim->After(ctx_.cost->DecodeStepSeconds(batch, context), [this, batch] {
    stepping_ = false;
    std::vector<InFlightRequest*> done;
    std::vector<InFlightRequest*> still;
    for (size_t i = 0; i < running_.size(); ++i) {
      InFlightRequest* r = running_[i];
      if (i < batch) ++r->generated;
      (r->generated >= r->record.output_tokens ? done : still).push_back(r);
    }
    running_ = std::move(still);
    for (InFlightRequest* r : done) {
      r->record.finish_s = ctx_.sim->now();
      ReleaseBlocks(r->decode_blocks);
      r->decode_blocks.clear();
      on_finished(r);
    }
    Step();
  });
}

}  // namespace kvpool::engine
