#include "transfer/shm_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"
#include "transfer/shm_mapping.h"
#include "transfer/shm_protocol.h"
#include "transfer/socket_util.h"
#include "transfer/tier_file_read.h"

namespace kvpool::transfer {
namespace {

constexpr uint64_t kMinChunk = 64 << 10;
constexpr uint64_t kMaxChunk = 4 << 20;

struct CopyChunk {
  char* local;
  uint64_t offset;
  uint64_t length;
  uint32_t index;
  OpKind kind;
  uint64_t* checksum;  // a whole op's read, hashed as it is copied; else null
  bool from_tier;      // a whole op's read from the store's SSD tier file
};

// Reads one op from the store's SSD tier file (the whole op: its hash runs through it in order).
void ReadTierAndFinish(const CopyChunk& c, const ShmMapping& mapping, BatchState& batch) {
  if (!mapping.served()) {
    batch.FinishPart(c.index, mapping.StaleStatus());
    return;
  }
  ChecksumStream hash;
  Status read = ReadTierFile(mapping.tier_fd(), c.offset, c.local, c.length, c.checksum ? &hash : nullptr,
                             &batch.buffers());
  if (read.ok() && c.checksum != nullptr) *c.checksum = hash.Digest();
  // Checked after the read too: a store that restarted meanwhile may have reused the file.
  if (read.ok() && !mapping.served()) read = mapping.StaleStatus();
  batch.FinishPart(c.index, std::move(read));
}

// Copies one chunk between the caller's buffer and the mapped segment, then reports it.
void CopyAndFinish(const CopyChunk& c, const ShmMapping& mapping, BatchState& batch) {
  if (c.from_tier) return ReadTierAndFinish(c, mapping, batch);
  {
    AccessSection section(batch.buffers());
    if (!section.entered()) {
      batch.FinishPart(c.index, Timeout("batch abandoned before the copy ran"));
      return;
    }
    if (!mapping.served()) {
      batch.FinishPart(c.index, mapping.StaleStatus());
      return;
    }
    char* segment = mapping.base() + c.offset;
    if (c.checksum != nullptr) {
      *c.checksum = CopyWithChecksum(c.local, segment, c.length);
    } else if (c.kind == OpKind::kRead) {
      std::memcpy(c.local, segment, c.length);
    } else {
      std::memcpy(segment, c.local, c.length);
    }
  }
  // Checked after the copy too: a read that overlapped a withdrawal may hold reused bytes.
  batch.FinishPart(c.index, mapping.served() ? Status::Ok() : mapping.StaleStatus());
}

class CopyJob final : public ParallelJob {
 public:
  CopyJob(std::vector<CopyChunk> chunks, std::shared_ptr<ShmMapping> mapping,
          std::shared_ptr<BatchState> batch)
      : ParallelJob(chunks.size()),
        chunks_(std::move(chunks)),
        mapping_(std::move(mapping)),
        batch_(std::move(batch)) {}

 protected:
  void RunTask(size_t i) override { CopyAndFinish(chunks_[i], *mapping_, *batch_); }

 private:
  std::vector<CopyChunk> chunks_;
  std::shared_ptr<ShmMapping> mapping_;
  std::shared_ptr<BatchState> batch_;
};

class ShmChannel final : public SegmentChannel {
 public:
  ShmChannel(SegmentEndpoint endpoint, const TransferOptions& options,
             std::shared_ptr<HelperPool> pool, std::shared_ptr<ShmMapping> mapping)
      : endpoint_(std::move(endpoint)),
        options_(options),
        pool_(std::move(pool)),
        size_(mapping->size()),
        mapping_(std::move(mapping)) {}

  std::string_view transport_name() const override { return "shm"; }
  uint64_t size() const override { return size_; }
  std::shared_ptr<const SegmentMapping> Mapping() override { return CurrentMapping(); }

  void Submit(std::span<const ChannelOp> ops, const std::shared_ptr<BatchState>& batch) override {
    std::shared_ptr<ShmMapping> mapping = CurrentMapping();
    uint64_t total = 0;
    for (const ChannelOp& op : ops) total += op.length;
    if (!mapping) {
      for (const ChannelOp& op : ops) {
        batch->FinishPart(op.index, Stale(fmt::format("segment {} is no longer served by {}",
                                                      endpoint_.segment_id, endpoint_.shm_socket)));
      }
      return;
    }
    // Bounds against the store's real size (the endpoint's size may be missing or old).
    std::vector<ChannelOp> valid;
    valid.reserve(ops.size());
    for (const ChannelOp& op : ops) {
      if (op.from_tier && mapping->tier_fd() < 0) {
        batch->FinishPart(op.index, InvalidArgument(fmt::format("the store of segment {} has no SSD tier",
                                                                endpoint_.segment_id)));
      } else if (op.from_tier && (op.offset > mapping->tier_size() || op.length > mapping->tier_size() - op.offset)) {
        batch->FinishPart(op.index, InvalidArgument(fmt::format("[{}, +{}) is outside the SSD tier of {} bytes "
                                                                "under segment {}",
                                                                op.offset, op.length, mapping->tier_size(),
                                                                endpoint_.segment_id)));
      } else if (!op.from_tier && (op.offset > mapping->size() || op.length > mapping->size() - op.offset)) {
        batch->FinishPart(op.index, InvalidArgument(fmt::format(
                                        "[{}, +{}) is outside segment {} of {} bytes", op.offset,
                                        op.length, endpoint_.segment_id, mapping->size())));
      } else {
        valid.push_back(op);
      }
    }

    int threads = pool_->helper_threads() + 1;
    if (total < ShmTransport::kShmInlineBytes || threads == 1) {
      for (const ChannelOp& op : valid) {
        CopyAndFinish(
            {op.local, op.offset, op.length, static_cast<uint32_t>(op.index), op.kind, op.checksum, op.from_tier},
            *mapping, *batch);
      }
      return;
    }
    // Enough chunks that every thread stays busy to the end; never so small that claiming
    // one costs more than copying it.
    uint64_t chunk = std::clamp<uint64_t>(total / (static_cast<uint64_t>(threads) * 4), kMinChunk, kMaxChunk);
    chunk = (chunk + 4095) & ~uint64_t{4095};
    std::vector<CopyChunk> chunks;
    for (const ChannelOp& op : valid) {
      // A hash runs through an op in order, so an op to hash is one task (a batch to hash is
      // many ops: the restore's windows, a BatchGet's values); so is a read from the tier file.
      if (op.checksum != nullptr || op.from_tier) {
        chunks.push_back(
            {op.local, op.offset, op.length, static_cast<uint32_t>(op.index), op.kind, op.checksum, op.from_tier});
        continue;
      }
      uint64_t parts = (op.length + chunk - 1) / chunk;
      if (parts > 1) batch->ExpectParts(op.index, static_cast<uint32_t>(parts));
      for (uint64_t done = 0; done < op.length; done += chunk) {
        chunks.push_back({op.local + done, op.offset + done, std::min(chunk, op.length - done),
                          static_cast<uint32_t>(op.index), op.kind, nullptr, false});
      }
    }
    pool_->Run(std::make_shared<CopyJob>(std::move(chunks), std::move(mapping), batch));
  }

 private:
  // The mapping to copy through, re-asking the store once when the one held was withdrawn.
  std::shared_ptr<ShmMapping> CurrentMapping() {
    std::lock_guard<std::mutex> lock(mu_);
    if (mapping_ && mapping_->served()) return mapping_;
    if (mapping_) {
      mapping_.reset();
      auto grant = RequestShmGrant(endpoint_.shm_socket, endpoint_.served_id(), options_.connect_timeout,
                                   options_.secret ? &*options_.secret : nullptr);
      if (grant.ok()) {
        auto remapped = ShmMapping::Map(endpoint_.served_id(), *grant, options_.shm_prefault_mapping);
        if (remapped.ok()) {
          spdlog::info("shm: segment {} re-served by {}; remapped", endpoint_.segment_id, endpoint_.shm_socket);
          mapping_ = std::move(remapped.value());
        }
      }
    }
    return mapping_;  // null: STALE until the engine opens the segment again
  }

  const SegmentEndpoint endpoint_;
  const TransferOptions options_;
  const std::shared_ptr<HelperPool> pool_;
  const uint64_t size_;
  std::mutex mu_;
  std::shared_ptr<ShmMapping> mapping_;
};

}  // namespace

ShmTransport::ShmTransport(const TransferOptions& options)
    : options_(options), pool_(std::make_shared<HelperPool>(std::max(0, options.shm_copy_threads - 1))) {}

Result<std::shared_ptr<SegmentChannel>> ShmTransport::Open(const SegmentEndpoint& endpoint) {
  auto grant = RequestShmGrant(endpoint.shm_socket, endpoint.served_id(), options_.connect_timeout,
                               options_.secret ? &*options_.secret : nullptr);
  if (!grant.ok()) return grant.status();
  auto mapping = ShmMapping::Map(endpoint.served_id(), *grant, options_.shm_prefault_mapping);
  if (!mapping.ok()) return mapping.status();
  return std::shared_ptr<SegmentChannel>(
      std::make_shared<ShmChannel>(endpoint, options_, pool_, std::move(mapping.value())));
}

}  // namespace kvpool::transfer
