#include "engine/network_kv_handoff.h"

#include <thread>
#include <vector>

#include "handoff/handoff_receiver.h"
#include "handoff/handoff_sender.h"

namespace kvpool::engine {
namespace {

using Clock = std::chrono::steady_clock;

// One decode cache's receiver and a sender per prefill stage.
struct Link {
  std::unique_ptr<handoff::HandoffReceiver> receiver;
  std::vector<std::unique_ptr<handoff::HandoffSender>> senders;
};

class NetworkKvHandoff final : public KvHandoff {
 public:
  explicit NetworkKvHandoff(NetworkKvHandoffOptions options) : options_(options) {}
  ~NetworkKvHandoff() override {
    for (auto& [cache, link] : links_) link.senders.clear();  // senders before their receiver
  }

  Result<uint64_t> Transfer(const KvHandoffRequest& r) override {
    auto layouts = HandoffLayoutsOf(r);
    if (!layouts.ok()) return layouts.status();
    const handoff::PrefillLayout& prefill = layouts->prefill;
    const handoff::DecodeLayout& decode = layouts->decode;
    const uint64_t bytes = layouts->bytes;
    if (r.tokens == 0) return uint64_t{0};

    auto link = LinkFor(r.decode_caches[0], prefill, decode);
    if (!link.ok()) return link.status();
    handoff::HandoffReceiver& receiver = *(*link)->receiver;
    const auto deadline = Clock::now() + options_.timeout;
    std::vector<handoff::DecodeTarget> targets;
    // Caches in GPU memory (--gpu): the receiver scatters on the decode GPUs and each sender
    // gathers on its stage's GPU.
    for (size_t d = 0; d < r.decode_caches.size(); ++d) {
      targets.push_back({r.decode_caches[d],
                         {r.decode_block_tables[d].begin(), r.decode_block_tables[d].end()},
                         d < r.decode_devices.size() ? r.decode_devices[d] : -1});
    }
    KVPOOL_RETURN_IF_ERROR(receiver.Expect(r.request_id, 0, r.tokens, std::move(targets)));
    std::vector<Status> sent(r.stage_caches.size());
    std::vector<std::thread> stages;
    for (size_t s = 0; s < r.stage_caches.size(); ++s) {
      stages.emplace_back([&, s] {
        sent[s] = (*link)->senders[s]->Send(r.request_id, 0, r.tokens, *r.stage_caches[s], r.stage_block_tables[s],
                                            deadline, s < r.stage_devices.size() ? r.stage_devices[s] : -1);
      });
    }
    for (std::thread& t : stages) t.join();
    Status failed;
    for (const Status& st : sent) {
      if (!st.ok() && failed.ok()) failed = st;
    }
    if (failed.ok()) failed = receiver.Wait(r.request_id, deadline);
    if (failed.ok()) return bytes;
    receiver.Cancel(r.request_id);
    if (failed.code() == StatusCode::kUnavailable) {  // a broken link: the next request builds a new one
      std::lock_guard<std::mutex> lock(mu_);
      links_.erase(r.decode_caches[0]);
    }
    return failed;
  }

  const char* name() const override { return "network"; }

 private:
  // Keyed by the decode instance's rank 0 cache.
  Result<Link*> LinkFor(const connector::PagedKvCache* decode_cache, const handoff::PrefillLayout& prefill,
                        const handoff::DecodeLayout& decode) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(decode_cache);
    if (it != links_.end()) return &it->second;
    Link link;
    handoff::HandoffReceiverOptions ro;
    ro.max_write_bytes = options_.max_write_bytes;
    ro.landing_bytes = std::max(options_.landing_bytes, options_.max_write_bytes);
    ro.request_timeout = options_.timeout;
    handoff::HandoffSenderOptions so;
    if (options_.ucx.enabled) {
      ro.ucx = so.transfer.ucx = options_.ucx;
      ro.shm_socket_dir = "";
    }
    auto receiver = handoff::HandoffReceiver::Start(prefill, decode, ro);
    if (!receiver.ok()) return receiver.status();
    link.receiver = std::move(receiver).value();
    for (uint32_t s = 0; s < prefill.num_ranks(); ++s) {
      auto sender = handoff::HandoffSender::Connect(link.receiver->address(), prefill, decode, s, so);
      if (!sender.ok()) return sender.status();
      link.senders.push_back(std::move(sender).value());
    }
    return &links_.emplace(decode_cache, std::move(link)).first->second;
  }

  const NetworkKvHandoffOptions options_;
  std::mutex mu_;
  std::map<const connector::PagedKvCache*, Link> links_;
};

}  // namespace

std::unique_ptr<KvHandoff> NewNetworkKvHandoff(NetworkKvHandoffOptions options) {
  return std::make_unique<NetworkKvHandoff>(options);
}

}  // namespace kvpool::engine
