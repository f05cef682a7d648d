#include "master/segment_journal.h"

#include <algorithm>
#include <random>

namespace kvpool::master {

namespace {

uint64_t RandomJournalId() {
  std::random_device random;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{random()} << 32) | random();  // 0 means "no journal yet"
  return id;
}

}  // namespace

SegmentJournal::SegmentJournal() : id_(RandomJournalId()) {}

uint64_t SegmentJournal::Append(proto::IndexRecord record) {
  std::lock_guard lock(mu_);
  if (closed_ || broken_) return 0;
  if (unconfirmed_.size() >= kMaxUnconfirmed) {
    broken_ = true;
    changed_.notify_all();
    return 0;
  }
  unconfirmed_.push_back(std::move(record));
  changed_.notify_all();
  return next_seq_++;
}

uint64_t SegmentJournal::PromiseLeaseHorizon(int64_t needed_unix_ms, int64_t target_unix_ms) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || broken_) return 0;
    if (horizon_unix_ms_ >= needed_unix_ms) return horizon_seq_;
  }
  proto::IndexRecord record;
  record.set_op(proto::IndexRecord::HORIZON);
  record.set_lease_horizon_unix_ms(target_unix_ms);
  const uint64_t seq = Append(std::move(record));
  std::lock_guard lock(mu_);
  // Two callers may race here; the larger promise wins and both wait for their own record.
  if (seq != 0 && target_unix_ms > horizon_unix_ms_) {
    horizon_unix_ms_ = target_unix_ms;
    horizon_seq_ = seq;
  }
  return seq;
}

int64_t SegmentJournal::lease_horizon_unix_ms() const {
  std::lock_guard lock(mu_);
  return horizon_unix_ms_;
}

uint64_t SegmentJournal::last_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

bool SegmentJournal::WaitConfirmed(uint64_t seq, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  changed_.wait_until(lock, deadline, [&] { return confirmed_ >= seq || closed_ || broken_; });
  return confirmed_ >= seq;
}

void SegmentJournal::Pull(uint64_t journal_id, uint64_t acked_seq, std::chrono::milliseconds wait,
                          size_t max_records, proto::PullIndexReply* reply) {
  std::unique_lock lock(mu_);
  if (journal_id == id_ && acked_seq > confirmed_) {
    const uint64_t newly = std::min<uint64_t>(acked_seq - confirmed_, unconfirmed_.size());
    unconfirmed_.erase(unconfirmed_.begin(), unconfirmed_.begin() + static_cast<ptrdiff_t>(newly));
    confirmed_ += newly;
    changed_.notify_all();
  }
  // A store new to this journal gets everything unconfirmed; one that is current gets what
  // follows its ack. Records are resent until confirmed, so a lost reply costs a resend only.
  const uint64_t from = journal_id == id_ ? std::max(acked_seq, confirmed_) : confirmed_;
  changed_.wait_for(lock, wait, [&] { return next_seq_ - 1 > from || closed_ || broken_; });
  reply->set_journal_id(id_);
  reply->set_first_seq(from + 1);
  const uint64_t skip = from - confirmed_;
  for (uint64_t i = skip; i < unconfirmed_.size() && i - skip < max_records; ++i) {
    *reply->add_records() = unconfirmed_[i];
  }
}

void SegmentJournal::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  changed_.notify_all();
}

bool SegmentJournal::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

}  // namespace kvpool::master
