// SsdTier: a store's objects on SSD, in a TierFile cut into equal slots, one object per slot.
//
//   auto tier = SsdTier::Open("/nvme/kvpool.tier", 64_GiB, {.slot_bytes = 4_MiB});
//   tier->Put("ns/chunk/s0", "ns/chunk", bytes);   // evicts least recently used groups whole
//   tier->Get("ns/chunk/s0", buffer);               // CORRUPT (and dropped) if the bytes changed
//
// Why slots: a model's stage objects all have one size, so a slot as large as the largest
// wastes little, needs no allocator, and lets a restarted store rebuild the tier's index by
// reading only the slots' headers (one 4 KiB read per slot, many in flight).
//
// Slot layout: a 4 KiB header (magic, the header's own checksum, the value's length and
// checksum, a put sequence number, key, group), then the value. Invariants:
//   * The index lists an object only once its header and value are on the file; a failed
//     write leaves the key absent.
//   * A removed object's header is zeroed before Remove returns, so a restart never brings
//     it back. Evicted and replaced objects' headers are zeroed when their put batch ends;
//     one a crash left behind brings back only an object whose bytes are whole (or that its
//     checksum then catches), and of two copies of a key the newer wins.
//   * Every Get compares the value with its checksum before the caller sees a byte; a
//     mismatch drops the object and answers CORRUPT.
//   * Eviction takes a group whole (every object put with the same group name), least
//     recently used first, so a prefix is never half on SSD.
//
// Thread-safe: one mutex; its I/O runs under it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "ssd/tier_file.h"

namespace kvpool::ssd {

struct SsdTierOptions {
  uint64_t slot_bytes = uint64_t{4} << 20;  // a multiple of 4 KiB; holds the header and a value
  TierFileOptions file;
};

struct SsdPut {
  std::string_view key;
  std::string_view group;  // "" for none
  std::span<const std::byte> value;
  // When set, the value must hash to it (the writer's checksum, common/checksum.h), else the
  // put is CORRUPT and nothing is written: a copy of bytes that changed under it is refused.
  std::optional<uint64_t> expected_checksum;
  // With a group: how many objects the whole group has. A restart keeps a group only when it
  // finds that many of its objects on the file (the most any of their headers names), so a
  // crash mid-way through a group's puts leaves none of it. 0: no such rule.
  uint32_t group_members = 0;
};

// What the tier holds of one object (what a restarted store announces to the master).
struct SsdObjectInfo {
  std::string key;
  std::string group;
  uint64_t length = 0;
  uint64_t checksum = 0;
  uint64_t value_offset = 0;  // ValueOffset()
};
struct SsdGet {
  std::string_view key;
  std::span<std::byte> out;
};

struct SsdTierStats {
  uint64_t capacity_bytes = 0;  // what values may take: slots x (slot - header)
  uint64_t value_bytes = 0;     // what values take now
  uint64_t slots = 0;
  uint64_t objects = 0;
  uint64_t hits = 0, misses = 0, corrupt = 0;
  uint64_t evicted_objects = 0;
  uint64_t restored_objects = 0;  // found on the file at Open
  uint64_t incomplete_dropped = 0;  // found at Open in groups short of objects (dropped)
};

class SsdTier {
 public:
  static constexpr uint64_t kHeaderBytes = 4096;

  // Opens (or creates) the tier at `path` with `size` bytes (whole slots; the rest unused)
  // and rebuilds the index from the slots' headers. Errors as TierFile::Open, and
  // INVALID_ARGUMENT for a slot size that is not a multiple of 4 KiB above the header.
  static Result<std::unique_ptr<SsdTier>> Open(const std::string& path, uint64_t size, SsdTierOptions options);
  ~SsdTier();
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  // Stores `value` under `key`, replacing an older copy; `group` ("" for none) is evicted
  // whole with the other objects put under it. Evicts least recently used groups until a
  // slot is free. INVALID_ARGUMENT when the value does not fit a slot or the key and group
  // do not fit a header; the I/O error otherwise (the key is then absent).
  Status Put(std::string_view key, std::string_view group, std::span<const std::byte> value);
  // Copies the value into `out` and returns its length. NOT_FOUND; INVALID_ARGUMENT when
  // `out` is shorter than the value; CORRUPT when its bytes no longer match its checksum
  // (the object is dropped); the I/O error.
  Result<uint64_t> Get(std::string_view key, std::span<std::byte> out);
  // The same for many objects, one result each, queue_depth requests on the file at all
  // times: the next is prepared as soon as one is done (each through one of queue_depth
  // slot-sized buffers, allocated at Open).
  std::vector<Status> Put(std::span<const SsdPut> puts);
  std::vector<Result<uint64_t>> Get(std::span<const SsdGet> gets);
  // NOT_FOUND when absent.
  Status Remove(std::string_view key);
  // Where `key`'s value lies in the file (its slot, past the header), for readers that read
  // it from the file themselves and check it against its checksum; none when absent. The
  // slot may be reused once the object leaves, which only that checksum then tells.
  std::optional<uint64_t> ValueOffset(std::string_view key) const;
  // Makes `key`'s group the most recently used (read from the file by someone else).
  void MarkUsed(std::string_view key);
  const TierFile& file() const { return *file_; }
  bool Contains(std::string_view key) const;
  std::vector<std::string> Keys() const;
  std::vector<SsdObjectInfo> Objects() const;
  // The keys evicted to make room since the last call (the master must hear of them).
  std::vector<std::string> TakeEvicted();
  SsdTierStats stats() const;
  uint64_t max_value_bytes() const { return options_.slot_bytes - kHeaderBytes; }

 private:
  struct Object {
    uint64_t slot = 0;
    uint64_t length = 0;
    uint64_t checksum = 0;
    std::string group;
  };
  struct Unit {  // what eviction takes at once: a group's objects, or one ungrouped object
    std::vector<std::string> keys;
    std::list<std::string>::iterator lru;  // valid once listed
    bool listed = false;
  };

  SsdTier(std::unique_ptr<TierFile> file, SsdTierOptions options);
  Status Rebuild();
  static std::string UnitName(std::string_view key, std::string_view group);
  void Touch(const std::string& unit);
  // Puts `key` into the index, its unit (now the most recent) and the stats; Forget undoes it.
  void Index(const std::string& key, Object object);
  // Takes `key` out of the index and its unit; the slot goes back to the free list.
  void Forget(const std::string& key);
  // Zeroes slots' headers, so a restart finds nothing there.
  Status ClearHeaders(std::span<const uint64_t> slots);
  // The same, best effort (after a batch): a header left behind only brings back, after a
  // restart, an object whose bytes are still whole (or that its checksum then catches).
  void ClearHeadersOrWarn(std::span<const uint64_t> slots, const char* whose);
  // A free slot, evicting least recently used units when there is none; the slots of what it
  // evicted go to `to_clear` (less the one it returns).
  Result<uint64_t> TakeSlot(std::vector<uint64_t>& to_clear);
  uint64_t IoBytes(uint64_t value_length) const;  // header + value, aligned for the file
  uint64_t ValueAt(uint64_t slot) const { return slot * options_.slot_bytes + kHeaderBytes; }  // in the file

  const std::unique_ptr<TierFile> file_;
  const SsdTierOptions options_;
  const uint64_t slot_count_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Object> objects_;
  std::unordered_map<std::string, Unit> units_;
  std::list<std::string> lru_;  // unit names, least recent first
  std::vector<uint64_t> free_slots_;
  uint64_t next_sequence_ = 1;
  std::byte* const zeros_;            // a zeroed header, aligned for O_DIRECT
  std::vector<std::byte*> buffers_;  // queue_depth slot buffers, aligned for O_DIRECT
  std::vector<std::string> evicted_;  // since the last TakeEvicted
  SsdTierStats stats_;
};

}  // namespace kvpool::ssd
