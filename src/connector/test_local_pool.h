// Test-only: a pool in this process with no gRPC and no transport in the path — the master's
// own PoolMetadata (placement, groups, leases, eviction) and one segment of memory, called
// directly. Debian's gRPC is not built with ThreadSanitizer, so the connector's threaded
// engines run under TSan against this pool (test_pool.h's InProcessPool is the real thing
// over gRPC and sockets, for every other build). Reads copy out of the segment, or map it in
// place, under the lookup's lease exactly as a client does; puts place, copy, then complete.
#pragma once

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "common/checksum.h"
#include "common/clock.h"
#include "connector/chunk_store.h"
#include "master/pool_metadata.h"

namespace kvpool::connector::testing {

class LocalPoolChunkStore final : public ChunkStore {
 public:
  explicit LocalPoolChunkStore(uint64_t memory, uint64_t lease_ms = 5000)
      : metadata_(Options(lease_ms), SteadyClock::Get()), segment_(std::make_shared<Segment>(memory)) {
    master::SegmentInfo info;
    info.store_id = "local";
    info.host_id = "local";
    info.tcp_address = "127.0.0.1:1";  // never dialled: no transport here
    info.size = memory;
    (void)metadata_.MountSegment(info).value();
  }

  std::shared_ptr<const client::LookupResult> Lookup(std::span<const std::string> keys) override {
    const std::vector<std::string_view> views(keys.begin(), keys.end());
    const auto asked = std::chrono::steady_clock::now();
    master::BatchGetResult got = metadata_.BatchGetReplicas(views, 0);
    std::vector<Result<uint64_t>> lengths;
    std::vector<uint64_t> checksums, offsets;
    for (const master::GetResult& r : got.results) {
      lengths.push_back(r.status.ok() ? Result<uint64_t>(r.length) : Result<uint64_t>(r.status));
      checksums.push_back(r.checksum);
      offsets.push_back(r.replicas.empty() ? 0 : r.replicas[0].offset);
    }
    return std::make_shared<const Found>(std::move(lengths), std::move(checksums),
                                         asked + std::chrono::milliseconds(got.lease_ms), std::move(offsets));
  }

  std::vector<Result<uint64_t>> Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                     std::span<const client::ValueBuffer> buffers,
                                     client::ChecksumCheck check) override {
    const auto& found = static_cast<const Found&>(lookup);  // only this store's lookups come here
    std::vector<Result<uint64_t>> out;
    for (size_t j = 0; j < indices.size(); ++j) {
      const size_t i = indices[j];
      if (!found.length(i).ok()) {
        out.push_back(found.length(i).status());
        continue;
      }
      const uint64_t length = found.length(i).value();
      if (buffers[j].size() < length) {
        out.push_back(InvalidArgument("buffer too small"));
      } else if (std::chrono::steady_clock::now() >= found.lease_deadline()) {
        out.push_back(Timeout("lease ended before the read could start"));
      } else {
        const std::byte* stored = segment_->bytes().data() + found.offsets[i];
        bool matches = true;
        if (check == client::ChecksumCheck::kBeforeAnswer) {
          matches = CopyWithChecksum(buffers[j].data(), stored, length) == found.checksum(i);
        } else {
          std::memcpy(buffers[j].data(), stored, length);
        }
        out.push_back(matches ? Result<uint64_t>(length) : Corrupt("the bytes read do not match the value's checksum"));
      }
    }
    return out;
  }

  Result<transfer::MappedRange> Map(const client::LookupResult& lookup, size_t index) override {
    const auto& found = static_cast<const Found&>(lookup);
    if (!found.length(index).ok()) return found.length(index).status();
    if (std::chrono::steady_clock::now() >= found.lease_deadline()) return Timeout("lease ended before the map");
    return transfer::MappedRange{segment_, segment_->bytes().data() + found.offsets[index],
                                 found.length(index).value()};
  }

  Result<std::vector<bool>> Exists(std::span<const std::string> keys) override {
    const std::vector<std::string_view> views(keys.begin(), keys.end());
    std::string present;
    metadata_.BatchExists(views, &present);
    std::vector<bool> out;
    for (char c : present) out.push_back(c != 0);
    return out;
  }

  std::vector<Status> Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                          std::span<const std::string> groups) override {
    std::vector<master::PutStartItem> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      items.push_back({keys[i], values[i].size(), groups.empty() ? std::string_view() : groups[i],
                       Checksum(values[i])});
    }
    master::BatchPutStartResult started = metadata_.BatchPutStart(items, {});
    std::vector<Status> out;
    std::vector<std::string_view> placed;
    for (size_t i = 0; i < keys.size(); ++i) {
      out.push_back(started.results[i].status);
      if (!out.back().ok()) continue;
      std::memcpy(segment_->bytes().data() + started.results[i].replicas[0].offset, values[i].data(),
                  values[i].size());
      placed.push_back(keys[i]);
    }
    const std::vector<Status> ended = metadata_.BatchPutEnd(placed);
    for (size_t i = 0, k = 0; i < keys.size(); ++i) {
      if (out[i].ok()) out[i] = ended[k++];
    }
    metadata_.RunMaintenance();  // frees what removals left leased, as the master's thread does
    return out;
  }

  std::vector<Status> Remove(std::span<const std::string> keys) override {
    const std::vector<std::string_view> views(keys.begin(), keys.end());
    return metadata_.BatchRemove(views);
  }
  Status RegisterBuffer(void*, size_t) override { return Status::Ok(); }
  Status UnregisterBuffer(void*) override { return Status::Ok(); }

  // Flips one bit of `key`'s stored value: only its checksum can tell.
  void CorruptStoredValue(const std::string& key) {
    const std::vector<std::string> keys{key};
    auto found = Lookup(keys);
    ASSERT_TRUE(found->length(0).ok()) << found->length(0).status().ToString();
    segment_->bytes()[static_cast<const Found&>(*found).offsets[0] + found->length(0).value() / 2] ^= std::byte{1};
  }
  master::PoolStats Stat() const { return metadata_.Stat(); }

 private:
  // The segment's bytes, and the mapping a mapped restore holds on to.
  class Segment final : public transfer::SegmentMapping {
   public:
    explicit Segment(uint64_t size) : bytes_(new std::byte[size]()), size_(size) {}
    std::span<const std::byte> bytes() const override { return {bytes_.get(), size_}; }
    std::span<std::byte> bytes() { return {bytes_.get(), size_}; }
    bool served() const override { return true; }

   private:
    std::unique_ptr<std::byte[]> bytes_;
    uint64_t size_;
  };
  // A lookup with where each found key's bytes are.
  struct Found final : client::LookupResult {
    Found(std::vector<Result<uint64_t>> lengths, std::vector<uint64_t> checksums,
          std::chrono::steady_clock::time_point deadline, std::vector<uint64_t> offsets)
        : client::LookupResult(std::move(lengths), std::move(checksums), deadline), offsets(std::move(offsets)) {}
    std::vector<uint64_t> offsets;
  };
  static master::PoolOptions Options(uint64_t lease_ms) {
    master::PoolOptions o;
    o.default_lease_ms = lease_ms;
    o.heartbeat_ttl_ms = uint64_t{24} * 3600 * 1000;  // the one segment never goes silent
    return o;
  }

  master::PoolMetadata metadata_;
  std::shared_ptr<Segment> segment_;
};

}  // namespace kvpool::connector::testing
