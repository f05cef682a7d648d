#include "master/leadership.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/host_port.h"
#include "etcd/part_leader.h"

namespace kvpool::master {
namespace {

using std::chrono::milliseconds;

// The lease is believed alive for this share of its ttl after a renewal was *sent*: etcd
// renews it on receipt, later, so it lives at least the whole ttl from then.
constexpr double kTrustedShareOfTtl = 0.9;
// Time for one etcd call before the loops try again.
constexpr milliseconds kEtcdCallTimeout{1000};
constexpr milliseconds kRetryPause{250};

}  // namespace

Result<std::unique_ptr<Leadership>> Leadership::Start(const LeadershipOptions& options, Events events) {
  if (Status s = CheckHostPort(options.advertise); !s.ok())
    return InvalidArgument(fmt::format("the address to advertise in etcd ('{}'): {}", options.advertise, s.message()));
  if (options.advertise.starts_with("0.0.0.0:") || options.advertise.starts_with("[::]:"))
    return InvalidArgument(fmt::format("cannot advertise {} in etcd: clients need an address they can reach "
                                       "(give --advertise HOST:PORT)",
                                       options.advertise));
  if (options.ttl < std::chrono::seconds(1)) return InvalidArgument("the leader lease ttl must be at least 1 s");
  auto etcd = etcd::EtcdClient::Create(options.etcd);
  if (!etcd.ok()) return etcd.status();
  std::unique_ptr<Leadership> leadership(new Leadership(options, std::move(events), *std::move(etcd)));
  leadership->renew_thread_ = std::thread([l = leadership.get()] { l->RenewLoop(); });
  leadership->campaign_thread_ = std::thread([l = leadership.get()] { l->CampaignLoop(); });
  return leadership;
}

Leadership::Leadership(const LeadershipOptions& options, Events events, std::unique_ptr<etcd::EtcdClient> etcd)
    : options_(options), events_(std::move(events)), etcd_(std::move(etcd)), election_(etcd::PartElection(options.part)) {}

Leadership::~Leadership() { (void)Resign(); }

int64_t Leadership::SteadyNowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Leadership::leading() const { return leading_.load() && SteadyNowNs() < lease_valid_until_ns_.load(); }

bool Leadership::Pause(milliseconds pause) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, pause, [this] { return stopping_; });
  return !stopping_;
}

void Leadership::RenewLoop() {
  const milliseconds renew_every = std::chrono::duration_cast<milliseconds>(options_.ttl) / 4;
  bool etcd_answers = true;
  for (;;) {
    int64_t lease = 0;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      lease = lease_;
    }
    const int64_t sent_ns = SteadyNowNs();
    Status outcome;
    if (lease == 0) {
      auto granted = etcd_->GrantLease(options_.ttl, kEtcdCallTimeout);
      outcome = granted.status();
      if (granted.ok()) {
        lease_valid_until_ns_.store(sent_ns + static_cast<int64_t>(kTrustedShareOfTtl * 1e9 * granted->ttl.count()));
        std::lock_guard lock(mu_);
        lease_ = granted->id;
        wake_.notify_all();
      }
    } else {
      auto ttl = etcd_->KeepAlive(lease, renew_every);
      outcome = ttl.status();
      if (ttl.ok()) {
        lease_valid_until_ns_.store(sent_ns + static_cast<int64_t>(kTrustedShareOfTtl * 1e9 * ttl->count()));
      } else if (ttl.status().code() == StatusCode::kNotFound) {
        LoseLease("etcd says its lease has expired");
      }
    }
    if (outcome.ok() != etcd_answers) {
      etcd_answers = outcome.ok();
      if (etcd_answers) {
        spdlog::info("master of part {}: etcd {} answers again", options_.part, etcd_->endpoints());
      } else {
        spdlog::warn("master of part {}: cannot renew its etcd lease ({}); it leads only while the lease "
                     "certainly lives",
                     options_.part, outcome.ToString());
      }
    }
    if (!Pause(outcome.ok() || lease != 0 ? renew_every : kRetryPause)) return;
  }
}

void Leadership::CampaignLoop() {
  for (;;) {
    int64_t lease = 0;
    uint64_t generation = 0;
    std::shared_ptr<etcd::Canceller> cancel;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || lease_ != 0; });
      if (stopping_) return;
      lease = lease_;
      generation = lease_generation_;
      campaign_cancel_ = cancel = std::make_shared<etcd::Canceller>();
    }
    auto before = etcd_->GetLeader(election_, kEtcdCallTimeout);
    const bool another_leads = before.ok() && before->value != options_.advertise;
    if (another_leads) {
      spdlog::info("master of part {}: standby; {} leads (term {})", options_.part, before->value, before->term);
    }
    auto won = etcd_->Campaign(election_, lease, options_.advertise, cancel.get());
    if (!won.ok()) {
      if (cancel->cancelled()) continue;  // lease lost or stopping: the loop's head decides
      if (won.status().code() == StatusCode::kNotFound) LoseLease("etcd refused the campaign's lease");
      spdlog::warn("master of part {}: campaign failed ({}); trying again", options_.part, won.status().ToString());
      if (!Pause(kRetryPause)) return;
      continue;
    }
    term_.store(won->term);
    elections_won_.fetch_add(1);
    if (another_leads) failovers_.fetch_add(1);
    events_.elected(won->term);
    bool lost_meanwhile = false;
    {
      std::lock_guard lock(mu_);
      lost_meanwhile = stopping_ || generation != lease_generation_;
      if (!lost_meanwhile) {
        won_ = *won;
        leading_.store(true);
      }
    }
    if (lost_meanwhile) {
      events_.deposed(won->term);
      continue;
    }
    spdlog::info("master of part {}: leads at {} (term {}{})", options_.part, options_.advertise, won->term,
                 another_leads ? fmt::format(", took over from {}", before->value) : "");
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] { return stopping_ || generation != lease_generation_; });
    if (stopping_) return;
  }
}

void Leadership::LoseLease(const char* why) {
  bool was_leading = false;
  {
    std::lock_guard lock(mu_);
    if (lease_ == 0) return;
    lease_ = 0;
    ++lease_generation_;
    won_.reset();
    if (campaign_cancel_) campaign_cancel_->Cancel();
    was_leading = leading_.exchange(false);
    wake_.notify_all();
  }
  if (was_leading) {
    spdlog::warn("master of part {}: no longer leads (term {}): {}; campaigning again as a standby", options_.part,
                 term_.load(), why);
    events_.deposed(term_.load());
  }
}

Status Leadership::Resign() {
  bool was_leading = false;
  std::optional<etcd::LeaderKey> won;
  int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    if (resigned_) return Status::Ok();
    resigned_ = stopping_ = true;
    was_leading = leading_.exchange(false);
    won = won_;
    won_.reset();
    lease = lease_;
    lease_ = 0;
    if (campaign_cancel_) campaign_cancel_->Cancel();
    wake_.notify_all();
  }
  if (renew_thread_.joinable()) renew_thread_.join();
  if (campaign_thread_.joinable()) campaign_thread_.join();
  if (was_leading) events_.deposed(term_.load());
  Status resigned = won ? etcd_->Resign(*won, kEtcdCallTimeout) : Status::Ok();
  // Revoking the lease ends a campaign still waiting in etcd too.
  if (lease != 0) (void)etcd_->RevokeLease(lease, kEtcdCallTimeout);
  if (won) {
    spdlog::info("master of part {}: resigned (term {}){}", options_.part, won->term,
                 resigned.ok() ? "" : ": " + resigned.ToString());
  }
  return resigned;
}

}  // namespace kvpool::master
