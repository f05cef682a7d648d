#include "store/tier_mover.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvpool::store {

namespace {

// A worker's batch: enough for the tier to keep its queue full, small enough to report soon.
constexpr uint64_t kMaxBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kSlotHeaderBytes = ssd::SsdTier::kHeaderBytes;

bool InsideSegment(const proto::IndexEntry& e, size_t segment_size) {
  return e.length() > 0 && e.offset() <= segment_size && e.length() <= segment_size - e.offset();
}

}  // namespace

Result<std::unique_ptr<TierMover>> TierMover::Open(const TierMoverOptions& options, std::span<std::byte> segment) {
  if (options.path.empty()) return InvalidArgument("the SSD tier needs a file path (--ssd PATH)");
  if (options.size_bytes == 0) return InvalidArgument("the SSD tier needs a size (--ssd-size SIZE)");
  if (options.max_value_bytes == 0 || options.max_value_bytes % kSlotHeaderBytes != 0) {
    return InvalidArgument(fmt::format("the SSD tier's largest object ({} bytes) must be a positive multiple of 4 KiB",
                                       options.max_value_bytes));
  }
  ssd::SsdTierOptions tier_options;
  tier_options.slot_bytes = options.max_value_bytes + kSlotHeaderBytes;
  auto tier = ssd::SsdTier::Open(options.path, options.size_bytes, tier_options);
  if (!tier.ok()) return tier.status();  // its message names the file
  std::unique_ptr<TierMover> mover(new TierMover(std::move(tier).value(), segment));
  if (!options.demote_inline) mover->worker_ = std::thread([m = mover.get()] { m->Work(); });
  return mover;
}

TierMover::TierMover(std::unique_ptr<ssd::SsdTier> tier, std::span<std::byte> segment)
    : tier_(std::move(tier)), segment_(segment) {}

TierMover::~TierMover() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

uint64_t TierMover::capacity_bytes() const { return tier_->stats().capacity_bytes; }

void TierMover::Demote(const proto::IndexEntry& entry) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(entry);
  }
  wake_.notify_one();
}

void TierMover::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::vector<proto::IndexEntry> batch = TakeBatchLocked();
    lock.unlock();
    DemoteBatch(batch);
    lock.lock();
  }
}

void TierMover::DemoteQueued() {
  if (worker_.joinable()) return;
  // One object at a time: a batch's writes complete in any order and each enters the tier's
  // LRU when it completes; one by one, the tier's order is the journal's.
  while (true) {
    std::vector<proto::IndexEntry> one;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      one.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    DemoteBatch(one);
  }
}

std::vector<proto::IndexEntry> TierMover::TakeBatchLocked() {
  std::vector<proto::IndexEntry> batch;
  uint64_t bytes = 0;
  while (!queue_.empty() && (batch.empty() || bytes + queue_.front().length() <= kMaxBatchBytes)) {
    bytes += queue_.front().length();
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void TierMover::DemoteBatch(const std::vector<proto::IndexEntry>& batch) {
  std::vector<ssd::SsdPut> puts;
  std::vector<size_t> of;  // batch index of each put
  std::vector<std::string> refused(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const proto::IndexEntry& e = batch[i];
    if (!InsideSegment(e, segment_.size())) {
      refused[i] = "the entry lies outside the segment";
      continue;
    }
    puts.push_back({e.key(), e.group(), segment_.subspan(e.offset(), e.length()), e.checksum(), e.group_members()});
    of.push_back(i);
  }
  const auto started = std::chrono::steady_clock::now();
  const std::vector<Status> written = tier_->Put(puts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  uint64_t written_bytes = 0;
  std::vector<uint64_t> offsets(batch.size(), 0);  // where each written value lies in the file
  for (size_t j = 0; j < written.size(); ++j) {
    if (!written[j].ok()) {
      refused[of[j]] = written[j].ToString();
    } else if (auto at = tier_->ValueOffset(batch[of[j]].key()); !at) {
      refused[of[j]] = "it left the SSD tier before it was reported";
    } else {
      offsets[of[j]] = *at;
      written_bytes += puts[j].value.size();
    }
  }
  std::lock_guard lock(mu_);
  moved_.demote_seconds += seconds;
  moved_.demoted_bytes += written_bytes;
  for (size_t i = 0; i < batch.size(); ++i) {
    proto::TierReport& r = reports_.emplace_back();
    r.set_kind(refused[i].empty() ? proto::TierReport::DEMOTED : proto::TierReport::DEMOTE_FAILED);
    ++(refused[i].empty() ? moved_.demoted : moved_.demote_failed);
    r.set_key(batch[i].key());
    r.set_put_id(batch[i].put_id());
    r.set_message(refused[i]);
    r.set_ssd_offset(offsets[i]);
  }
  ReportEvictedLocked();
}

void TierMover::ReportEvictedLocked() {
  for (std::string& key : tier_->TakeEvicted()) {
    proto::TierReport& r = reports_.emplace_back();
    r.set_kind(proto::TierReport::SSD_EVICTED);
    r.set_key(std::move(key));
  }
}

std::vector<bool> TierMover::Promote(std::span<const proto::IndexEntry* const> entries) {
  std::vector<bool> loaded(entries.size(), false);
  std::vector<ssd::SsdGet> gets;
  std::vector<size_t> of;
  std::vector<std::string> why(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const proto::IndexEntry& e = *entries[i];
    if (!InsideSegment(e, segment_.size())) {
      why[i] = "the range lies outside the segment";
      continue;
    }
    gets.push_back({e.key(), segment_.subspan(e.offset(), e.length())});
    of.push_back(i);
  }
  const auto started = std::chrono::steady_clock::now();
  const auto got = tier_->Get(gets);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t j = 0; j < got.size(); ++j) {
    const proto::IndexEntry& e = *entries[of[j]];
    if (!got[j].ok()) {
      why[of[j]] = got[j].status().ToString();
    } else if (*got[j] != e.length()) {
      why[of[j]] = fmt::format("the SSD copy holds {} bytes, the master expects {}", *got[j], e.length());
    } else {
      loaded[of[j]] = true;
      (void)tier_->Remove(e.key());  // one copy: the segment's now
    }
  }
  std::lock_guard lock(mu_);
  moved_.promote_seconds += seconds;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (loaded[i]) {
      ++moved_.promoted;
      moved_.promoted_bytes += entries[i]->length();
      continue;
    }
    ++moved_.promote_failed;
    spdlog::warn("SSD tier: cannot load {} into the segment: {}", entries[i]->key(), why[i]);
    proto::TierReport& r = reports_.emplace_back();
    r.set_kind(proto::TierReport::PROMOTE_FAILED);
    r.set_key(entries[i]->key());
    r.set_put_id(entries[i]->put_id());
    r.set_message(why[i]);
  }
  return loaded;
}

void TierMover::DropFromSsd(const std::string& key) { (void)tier_->Remove(key); }

void TierMover::MarkRead(const std::string& key) { tier_->MarkUsed(key); }

TierMoverStats TierMover::mover_stats() const {
  std::lock_guard lock(mu_);
  return moved_;
}

std::vector<proto::TierReport> TierMover::TakeReports() {
  std::lock_guard lock(mu_);
  return std::exchange(reports_, {});
}

void TierMover::PutBackReports(std::vector<proto::TierReport> reports) {
  if (reports.empty()) return;
  std::lock_guard lock(mu_);
  reports.insert(reports.end(), std::make_move_iterator(reports_.begin()), std::make_move_iterator(reports_.end()));
  reports_ = std::move(reports);
}

void TierMover::AppendObjects(proto::MountSegmentRequest* request) const {
  for (const ssd::SsdObjectInfo& o : tier_->Objects()) {
    proto::IndexEntry* e = request->add_entries();
    e->set_key(o.key);
    e->set_group(o.group);
    e->set_length(o.length);
    e->set_checksum(o.checksum);
    e->set_complete(true);
    e->set_on_ssd(true);
    e->set_offset(o.value_offset);
  }
}

}  // namespace kvpool::store
