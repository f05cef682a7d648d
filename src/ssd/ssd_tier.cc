#include "ssd/ssd_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"

namespace kvpool::ssd {
namespace {

// "TVPSSD02", little-endian. 02 added group_members: a file of 01 reads as empty.
constexpr uint64_t kMagic = 0x3230445353505654ULL;
constexpr uint64_t kFixedHeaderBytes = 56;  // magic .. group members (and 4 spare); key and group follow
constexpr uint64_t kHeadersPerRead = 1024;         // headers read at once while rebuilding

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

struct Header {
  uint64_t value_length = 0, value_checksum = 0, sequence = 0;
  std::string key, group;
  uint32_t group_members = 0;  // SsdPut::group_members
};

void Store64(std::byte* at, uint64_t v) { std::memcpy(at, &v, 8); }
uint64_t Load64(const std::byte* at) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

// Writes the header into a zeroed 4 KiB block. REQUIRES: key and group fit.
void EncodeHeader(const Header& h, std::byte* block) {
  std::memset(block, 0, SsdTier::kHeaderBytes);
  Store64(block, kMagic);
  Store64(block + 16, h.value_length);
  Store64(block + 24, h.value_checksum);
  Store64(block + 32, h.sequence);
  const uint32_t key_length = h.key.size(), group_length = h.group.size();
  std::memcpy(block + 40, &key_length, 4);
  std::memcpy(block + 44, &group_length, 4);
  std::memcpy(block + 48, &h.group_members, 4);
  std::memcpy(block + kFixedHeaderBytes, h.key.data(), key_length);
  std::memcpy(block + kFixedHeaderBytes + key_length, h.group.data(), group_length);
  Store64(block + 8, Checksum(block + 16, SsdTier::kHeaderBytes - 16));
}

// The header in a 4 KiB block, or nothing when the block holds none (zeroed, never written,
// torn, or describing a value longer than `max_value`).
std::optional<Header> DecodeHeader(const std::byte* block, uint64_t max_value) {
  if (Load64(block) != kMagic || Load64(block + 8) != Checksum(block + 16, SsdTier::kHeaderBytes - 16)) {
    return std::nullopt;
  }
  Header h;
  h.value_length = Load64(block + 16);
  h.value_checksum = Load64(block + 24);
  h.sequence = Load64(block + 32);
  uint32_t key_length, group_length;
  std::memcpy(&key_length, block + 40, 4);
  std::memcpy(&group_length, block + 44, 4);
  std::memcpy(&h.group_members, block + 48, 4);
  if (h.value_length > max_value || uint64_t{key_length} + group_length > SsdTier::kHeaderBytes - kFixedHeaderBytes) {
    return std::nullopt;
  }
  const auto* text = reinterpret_cast<const char*>(block + kFixedHeaderBytes);
  h.key.assign(text, key_length);
  h.group.assign(text + key_length, group_length);
  return h;
}

}  // namespace

Result<std::unique_ptr<SsdTier>> SsdTier::Open(const std::string& path, uint64_t size, SsdTierOptions options) {
  if (options.slot_bytes <= kHeaderBytes || options.slot_bytes % kHeaderBytes != 0) {
    return InvalidArgument(fmt::format("SSD tier slot size {} is not a multiple of 4 KiB above 4 KiB", options.slot_bytes));
  }
  if (size < options.slot_bytes) {
    return InvalidArgument(fmt::format("SSD tier size {} holds no slot of {} bytes", size, options.slot_bytes));
  }
  Result<std::unique_ptr<TierFile>> file = TierFile::Open(path, size / options.slot_bytes * options.slot_bytes, options.file);
  if (!file.ok()) return file.status();
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(file).value(), options));
  KVPOOL_RETURN_IF_ERROR(tier->Rebuild());
  return tier;
}

SsdTier::SsdTier(std::unique_ptr<TierFile> file, SsdTierOptions options)
    : file_(std::move(file)),
      options_(options),
      slot_count_(file_->size() / options.slot_bytes),
      zeros_(static_cast<std::byte*>(std::aligned_alloc(kHeaderBytes, kHeaderBytes))) {
  std::memset(zeros_, 0, kHeaderBytes);
  for (unsigned i = 0; i < options.file.queue_depth; ++i) {
    buffers_.push_back(static_cast<std::byte*>(std::aligned_alloc(kHeaderBytes, options.slot_bytes)));
  }
  stats_.slots = slot_count_;
  stats_.capacity_bytes = slot_count_ * (options.slot_bytes - kHeaderBytes);
}

SsdTier::~SsdTier() {
  std::free(zeros_);
  for (std::byte* b : buffers_) std::free(b);
}

Status SsdTier::Rebuild() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t max_value = options_.slot_bytes - kHeaderBytes;
  std::unordered_map<std::string, std::pair<Header, uint64_t>> newest;  // key -> its header, its slot
  std::vector<uint64_t> stale;  // older copies of a key (a crash between a put and its clean-up)
  std::byte* headers = static_cast<std::byte*>(std::aligned_alloc(kHeaderBytes, kHeadersPerRead * kHeaderBytes));
  Status status;
  for (uint64_t first = 0; first < slot_count_ && status.ok(); first += kHeadersPerRead) {
    const uint64_t n = std::min(kHeadersPerRead, slot_count_ - first);
    std::vector<FileIo> reads;
    for (uint64_t i = 0; i < n; ++i) {
      reads.push_back({FileIo::kRead, (first + i) * options_.slot_bytes, {headers + i * kHeaderBytes, kHeaderBytes}});
    }
    const std::vector<Status> done = file_->Run(reads);
    for (uint64_t i = 0; i < n; ++i) {
      if (!done[i].ok()) {
        status = done[i];
        break;
      }
      std::optional<Header> h = DecodeHeader(headers + i * kHeaderBytes, max_value);
      if (!h) continue;
      auto it = newest.find(h->key);
      if (it == newest.end()) {
        std::string key = h->key;  // copied first: the pair below takes h's strings
        newest.emplace(std::move(key), std::make_pair(std::move(*h), first + i));
      } else if (it->second.first.sequence < h->sequence) {
        stale.push_back(it->second.second);
        it->second = {std::move(*h), first + i};
      } else {
        stale.push_back(first + i);
      }
    }
  }
  std::free(headers);
  KVPOOL_RETURN_IF_ERROR(status);
  // A group comes back whole or not at all: one with fewer objects on the file than its
  // headers say it has was cut short by a crash mid-demotion, and its objects go too.
  struct GroupCount {
    uint64_t found = 0;
    uint32_t members = 0;  // the most any of its headers names (its latest demotion's)
  };
  std::unordered_map<std::string, GroupCount> groups;
  for (const auto& [key, found] : newest) {
    if (found.first.group.empty()) continue;
    GroupCount& g = groups[found.first.group];
    ++g.found;
    g.members = std::max(g.members, found.first.group_members);
  }
  for (auto it = newest.begin(); it != newest.end();) {
    const std::string& group = it->second.first.group;
    const auto g = group.empty() ? groups.end() : groups.find(group);
    if (g != groups.end() && g->second.found < g->second.members) {
      stale.push_back(it->second.second);
      ++stats_.incomplete_dropped;
      it = newest.erase(it);
    } else {
      ++it;
    }
  }
  if (stats_.incomplete_dropped > 0) {
    spdlog::warn("SSD tier {}: {} objects of groups found in part on the file (a crash mid-demotion) dropped",
                 file_->path(), stats_.incomplete_dropped);
  }
  KVPOOL_RETURN_IF_ERROR(ClearHeaders(stale));
  // Into the index in put order, so the least recently put group is evicted first.
  std::vector<const std::pair<Header, uint64_t>*> order;
  for (const auto& [key, found] : newest) order.push_back(&found);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first.sequence < b->first.sequence; });
  std::vector<bool> used(slot_count_, false);
  for (const auto* found : order) {
    const Header& h = found->first;
    Index(h.key, Object{found->second, h.value_length, h.value_checksum, h.group});
    used[found->second] = true;
    next_sequence_ = std::max(next_sequence_, h.sequence + 1);
  }
  for (uint64_t slot = slot_count_; slot-- > 0;) {
    if (!used[slot]) free_slots_.push_back(slot);  // low slots first out
  }
  stats_.restored_objects = objects_.size();
  if (!objects_.empty()) spdlog::info("SSD tier {}: {} objects found on the file", file_->path(), objects_.size());
  return Status::Ok();
}

std::string SsdTier::UnitName(std::string_view key, std::string_view group) {
  return group.empty() ? "k" + std::string(key) : "g" + std::string(group);
}

void SsdTier::Touch(const std::string& unit) {
  Unit& u = units_[unit];
  if (u.listed) lru_.erase(u.lru);
  u.lru = lru_.insert(lru_.end(), unit);
  u.listed = true;
}

void SsdTier::Index(const std::string& key, Object object) {
  const std::string unit = UnitName(key, object.group);
  stats_.value_bytes += object.length;
  ++stats_.objects;
  objects_[key] = std::move(object);
  units_[unit].keys.push_back(key);
  Touch(unit);
}

void SsdTier::Forget(const std::string& key) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  const std::string unit_name = UnitName(key, it->second.group);
  auto unit = units_.find(unit_name);
  if (unit != units_.end()) {
    std::erase(unit->second.keys, key);
    if (unit->second.keys.empty()) {
      if (unit->second.listed) lru_.erase(unit->second.lru);
      units_.erase(unit);
    }
  }
  free_slots_.push_back(it->second.slot);
  stats_.value_bytes -= it->second.length;
  --stats_.objects;
  objects_.erase(it);
}

Status SsdTier::ClearHeaders(std::span<const uint64_t> slots) {
  std::vector<FileIo> writes;
  for (uint64_t slot : slots) writes.push_back({FileIo::kWrite, slot * options_.slot_bytes, {zeros_, kHeaderBytes}});
  for (const Status& s : file_->Run(writes)) KVPOOL_RETURN_IF_ERROR(s);
  return Status::Ok();
}

void SsdTier::ClearHeadersOrWarn(std::span<const uint64_t> slots, const char* whose) {
  if (const Status cleared = ClearHeaders(slots); !cleared.ok()) {
    spdlog::warn("SSD tier {}: clearing the headers of {} failed: {}", file_->path(), whose, cleared.ToString());
  }
}

std::optional<uint64_t> SsdTier::ValueOffset(std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(std::string(key));
  if (it == objects_.end()) return std::nullopt;
  return ValueAt(it->second.slot);
}

void SsdTier::MarkUsed(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(std::string(key));
  if (it != objects_.end()) Touch(UnitName(it->first, it->second.group));
}

Result<uint64_t> SsdTier::TakeSlot(std::vector<uint64_t>& to_clear) {
  while (free_slots_.empty()) {
    if (lru_.empty()) return NoSpace(fmt::format("SSD tier {}: no slot to put into", file_->path()));
    const std::vector<std::string> keys = units_[lru_.front()].keys;  // copied: Forget edits the unit
    for (const std::string& key : keys) {
      to_clear.push_back(objects_[key].slot);
      Forget(key);
      ++stats_.evicted_objects;
      evicted_.push_back(key);
    }
  }
  const uint64_t slot = free_slots_.back();
  free_slots_.pop_back();
  // Reused at once: its new header replaces the old one (a write torn before it is caught by
  // the checksums), so it needs no clearing.
  std::erase(to_clear, slot);
  return slot;
}

uint64_t SsdTier::IoBytes(uint64_t value_length) const {
  return kHeaderBytes + (file_->alignment() > 1 ? RoundUp(value_length, kHeaderBytes) : value_length);
}

std::vector<Status> SsdTier::Put(std::span<const SsdPut> puts) {
  std::vector<Status> result(puts.size());
  for (size_t i = 0; i < puts.size(); ++i) {
    const SsdPut& p = puts[i];
    if (p.value.size() > options_.slot_bytes - kHeaderBytes) {
      result[i] = InvalidArgument(fmt::format("SSD tier: a value of {} bytes does not fit a slot of {}",
                                              p.value.size(), options_.slot_bytes));
    } else if (p.key.empty() || p.key.size() + p.group.size() > kHeaderBytes - kFixedHeaderBytes) {
      result[i] = InvalidArgument("SSD tier: the key is empty, or the key and group are too long for a slot's header");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> to_clear;  // slots whose objects left and that no new object took
  // One buffer per request in flight: the file asks for the next request only when one is done.
  std::vector<std::byte*> free_buffers = buffers_;
  std::vector<std::pair<Object, std::byte*>> pending(puts.size());
  size_t next = 0;
  file_->Stream(
      [&]() -> std::optional<TaggedIo> {
        while (next < puts.size()) {
          const size_t i = next++;
          if (!result[i].ok()) continue;
          Result<uint64_t> slot = TakeSlot(to_clear);
          if (!slot.ok()) {
            result[i] = slot.status();
            continue;
          }
          const SsdPut& p = puts[i];
          std::byte* buffer = free_buffers.back();
          free_buffers.pop_back();
          // Hashed as it is copied (one pass over the value), while the ring writes others.
          const uint64_t checksum = CopyWithChecksum(buffer + kHeaderBytes, p.value.data(), p.value.size());
          if (p.expected_checksum && *p.expected_checksum != checksum) {
            free_buffers.push_back(buffer);
            free_slots_.push_back(*slot);
            result[i] = Corrupt(fmt::format("SSD tier: {} does not match its writer's checksum; not written", p.key));
            continue;
          }
          EncodeHeader({p.value.size(), checksum, next_sequence_++, std::string(p.key), std::string(p.group),
                        p.group_members},
                       buffer);
          const uint64_t length = IoBytes(p.value.size());
          std::memset(buffer + kHeaderBytes + p.value.size(), 0, length - kHeaderBytes - p.value.size());
          pending[i] = {Object{*slot, p.value.size(), checksum, std::string(p.group)}, buffer};
          return TaggedIo{{FileIo::kWrite, *slot * options_.slot_bytes, {buffer, length}}, i};
        }
        return std::nullopt;
      },
      [&](uint64_t i, Status written) {
        auto& [object, buffer] = pending[i];
        free_buffers.push_back(buffer);
        if (!written.ok()) {
          result[i] = std::move(written);
          free_slots_.push_back(object.slot);
          return;
        }
        // The new copy is on the file: an older one goes, its header cleared below.
        const std::string key(puts[i].key);
        if (auto old = objects_.find(key); old != objects_.end()) {
          to_clear.push_back(old->second.slot);
          Forget(key);
        }
        Index(key, std::move(object));
      });
  ClearHeadersOrWarn(to_clear, "objects that left");
  return result;
}

std::vector<Result<uint64_t>> SsdTier::Get(std::span<const SsdGet> gets) {
  std::vector<Result<uint64_t>> result(gets.size(), uint64_t{0});
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> dropped;
  std::vector<std::byte*> free_buffers = buffers_;
  std::vector<std::pair<Object, std::byte*>> pending(gets.size());
  size_t next = 0;
  file_->Stream(
      [&]() -> std::optional<TaggedIo> {
        while (next < gets.size()) {
          const size_t i = next++;
          auto it = objects_.find(std::string(gets[i].key));
          if (it == objects_.end()) {
            ++stats_.misses;
            result[i] = NotFound(fmt::format("SSD tier: no object {}", gets[i].key));
          } else if (gets[i].out.size() < it->second.length) {
            result[i] = InvalidArgument(fmt::format("SSD tier: {} holds {} bytes, the buffer {}", gets[i].key,
                                                    it->second.length, gets[i].out.size()));
          } else {
            std::byte* buffer = free_buffers.back();
            free_buffers.pop_back();
            pending[i] = {it->second, buffer};
            return TaggedIo{{FileIo::kRead, it->second.slot * options_.slot_bytes, {buffer, IoBytes(it->second.length)}}, i};
          }
        }
        return std::nullopt;
      },
      [&](uint64_t i, Status read) {
        const auto& [o, buffer] = pending[i];
        free_buffers.push_back(buffer);
        if (!read.ok()) {
          result[i] = std::move(read);
          return;
        }
        const std::optional<Header> h = DecodeHeader(buffer, options_.slot_bytes - kHeaderBytes);
        if (!h || h->key != gets[i].key || h->value_length != o.length ||
            Checksum(buffer + kHeaderBytes, o.length) != o.checksum) {
          ++stats_.corrupt;
          if (auto it = objects_.find(std::string(gets[i].key)); it != objects_.end() && it->second.slot == o.slot) {
            Forget(std::string(gets[i].key));  // once, however often the batch asks
            dropped.push_back(o.slot);
            spdlog::warn("SSD tier {}: {} does not match its checksum; dropped", file_->path(), gets[i].key);
          }
          result[i] = Corrupt(fmt::format("SSD tier: {} does not match its checksum", gets[i].key));
          return;
        }
        std::memcpy(gets[i].out.data(), buffer + kHeaderBytes, o.length);
        if (objects_.count(std::string(gets[i].key))) Touch(UnitName(gets[i].key, o.group));
        ++stats_.hits;
        result[i] = o.length;
      });
  ClearHeadersOrWarn(dropped, "corrupt objects");
  return result;
}

Status SsdTier::Put(std::string_view key, std::string_view group, std::span<const std::byte> value) {
  const SsdPut put{key, group, value};
  return Put(std::span(&put, 1))[0];
}

Result<uint64_t> SsdTier::Get(std::string_view key, std::span<std::byte> out) {
  const SsdGet get{key, out};
  return std::move(Get(std::span(&get, 1))[0]);
}

Status SsdTier::Remove(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(std::string(key));
  if (it == objects_.end()) return NotFound(fmt::format("SSD tier: no object {}", key));
  const uint64_t slot = it->second.slot;
  Forget(std::string(key));
  return ClearHeaders(std::span(&slot, 1));
}

bool SsdTier::Contains(std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.count(std::string(key)) > 0;
}

std::vector<std::string> SsdTier::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [key, o] : objects_) keys.push_back(key);
  return keys;
}

std::vector<SsdObjectInfo> SsdTier::Objects() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SsdObjectInfo> out;
  out.reserve(objects_.size());
  for (const auto& [key, o] : objects_) {
    out.push_back({key, o.group, o.length, o.checksum, ValueAt(o.slot)});
  }
  return out;
}

std::vector<std::string> SsdTier::TakeEvicted() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(evicted_, {});
}

SsdTierStats SsdTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kvpool::ssd
