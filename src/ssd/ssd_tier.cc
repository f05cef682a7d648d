#include "ssd/ssd_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"

namespace kvpool::ssd {
namespace {

constexpr uint64_t kMagic = 0x3130445353505654ULL;  // "TVPSSD01", little-endian
constexpr uint64_t kFixedHeaderBytes = 48;         // magic .. group length; key and group follow
constexpr uint64_t kHeadersPerRead = 1024;         // headers read at once while rebuilding

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

struct Header {
  uint64_t value_length = 0, value_checksum = 0, sequence = 0;
  std::string key, group;
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
      io_(static_cast<std::byte*>(std::aligned_alloc(kHeaderBytes, options.slot_bytes))) {
  stats_.slots = slot_count_;
  stats_.capacity_bytes = slot_count_ * (options.slot_bytes - kHeaderBytes);
}

SsdTier::~SsdTier() { std::free(io_); }

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
  for (uint64_t slot : stale) KVPOOL_RETURN_IF_ERROR(ClearHeader(slot));
  // Into the index in put order, so the least recently put group is evicted first.
  std::vector<const std::pair<Header, uint64_t>*> order;
  for (const auto& [key, found] : newest) order.push_back(&found);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first.sequence < b->first.sequence; });
  std::vector<bool> used(slot_count_, false);
  for (const auto* found : order) {
    const Header& h = found->first;
    objects_[h.key] = Object{found->second, h.value_length, h.value_checksum, h.group};
    used[found->second] = true;
    const std::string unit = UnitName(h.key, h.group);
    units_[unit].keys.push_back(h.key);
    Touch(unit);
    stats_.value_bytes += h.value_length;
    next_sequence_ = std::max(next_sequence_, h.sequence + 1);
  }
  for (uint64_t slot = slot_count_; slot-- > 0;) {
    if (!used[slot]) free_slots_.push_back(slot);  // low slots first out
  }
  stats_.objects = stats_.restored_objects = objects_.size();
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

Status SsdTier::ClearHeader(uint64_t slot) {
  std::memset(io_, 0, kHeaderBytes);
  return file_->Run(std::vector<FileIo>{{FileIo::kWrite, slot * options_.slot_bytes, {io_, kHeaderBytes}}})[0];
}

Result<uint64_t> SsdTier::TakeSlot() {
  while (free_slots_.empty()) {
    if (lru_.empty()) return NoSpace(fmt::format("SSD tier {}: no slot to put into", file_->path()));
    const std::vector<std::string> keys = units_[lru_.front()].keys;  // copied: Forget edits the unit
    for (const std::string& key : keys) {
      const uint64_t slot = objects_[key].slot;
      Forget(key);
      ++stats_.evicted_objects;
      KVPOOL_RETURN_IF_ERROR(ClearHeader(slot));
    }
  }
  const uint64_t slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

Status SsdTier::Put(std::string_view key, std::string_view group, std::span<const std::byte> value) {
  if (value.size() > options_.slot_bytes - kHeaderBytes) {
    return InvalidArgument(fmt::format("SSD tier: a value of {} bytes does not fit a slot of {}", value.size(),
                                       options_.slot_bytes));
  }
  if (key.empty() || key.size() + group.size() > kHeaderBytes - kFixedHeaderBytes) {
    return InvalidArgument("SSD tier: the key is empty, or the key and group are too long for a slot's header");
  }
  const uint64_t checksum = Checksum(value);
  std::lock_guard<std::mutex> lock(mu_);
  Result<uint64_t> slot = TakeSlot();
  if (!slot.ok()) return slot.status();
  EncodeHeader({value.size(), checksum, next_sequence_++, std::string(key), std::string(group)}, io_);
  const uint64_t length = kHeaderBytes + RoundUp(value.size(), file_->alignment() > 1 ? kHeaderBytes : 1);
  std::memcpy(io_ + kHeaderBytes, value.data(), value.size());
  std::memset(io_ + kHeaderBytes + value.size(), 0, length - kHeaderBytes - value.size());
  const Status written =
      file_->Run(std::vector<FileIo>{{FileIo::kWrite, *slot * options_.slot_bytes, {io_, length}}})[0];
  if (!written.ok()) {
    free_slots_.push_back(*slot);
    return written;
  }
  // The new copy is on the file: the old one, if any, goes (its header cleared after).
  const std::string name(key);
  if (auto old = objects_.find(name); old != objects_.end()) {
    const uint64_t old_slot = old->second.slot;
    Forget(name);
    KVPOOL_RETURN_IF_ERROR(ClearHeader(old_slot));
  }
  objects_[name] = Object{*slot, value.size(), checksum, std::string(group)};
  const std::string unit = UnitName(key, group);
  units_[unit].keys.push_back(name);
  Touch(unit);
  stats_.value_bytes += value.size();
  ++stats_.objects;
  return Status::Ok();
}

Result<uint64_t> SsdTier::Get(std::string_view key, std::span<std::byte> out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(std::string(key));
  if (it == objects_.end()) {
    ++stats_.misses;
    return NotFound(fmt::format("SSD tier: no object {}", key));
  }
  const Object o = it->second;
  if (out.size() < o.length) {
    return InvalidArgument(fmt::format("SSD tier: {} holds {} bytes, the buffer {}", key, o.length, out.size()));
  }
  const uint64_t length = kHeaderBytes + RoundUp(o.length, file_->alignment() > 1 ? kHeaderBytes : 1);
  KVPOOL_RETURN_IF_ERROR(
      file_->Run(std::vector<FileIo>{{FileIo::kRead, o.slot * options_.slot_bytes, {io_, length}}})[0]);
  const std::optional<Header> h = DecodeHeader(io_, options_.slot_bytes - kHeaderBytes);
  if (!h || h->key != key || h->value_length != o.length || Checksum(io_ + kHeaderBytes, o.length) != o.checksum) {
    ++stats_.corrupt;
    Forget(std::string(key));
    const Status cleared = ClearHeader(o.slot);
    spdlog::warn("SSD tier {}: {} does not match its checksum; dropped{}", file_->path(), key,
                 cleared.ok() ? "" : " (its header could not be cleared: " + cleared.ToString() + ")");
    return Corrupt(fmt::format("SSD tier: {} does not match its checksum", key));
  }
  std::memcpy(out.data(), io_ + kHeaderBytes, o.length);
  Touch(UnitName(key, o.group));
  ++stats_.hits;
  return o.length;
}

Status SsdTier::Remove(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(std::string(key));
  if (it == objects_.end()) return NotFound(fmt::format("SSD tier: no object {}", key));
  const uint64_t slot = it->second.slot;
  Forget(std::string(key));
  return ClearHeader(slot);
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

SsdTierStats SsdTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kvpool::ssd
