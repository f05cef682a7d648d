// NetworkKvHandoff: the replay's handoff through the real handoff path (src/handoff): every
// decode cache gets a HandoffReceiver with a bounded landing segment, every prefill stage a
// HandoffSender to it; each stage gathers its layers of the request into pieces of at most
// max_write_bytes, writes them through the transfer engine (shm here: one host), and the
// receiver checks and scatters them into decode's pages. Stages send concurrently, as PP GPUs
// do; Transfer returns once decode holds every stage's part (or why not).
//
// Receivers and senders are made on first use per decode cache and kept; the layouts of a
// deployment never change. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "engine/kv_handoff.h"
#include "transfer/transfer_engine.h"  // UcxSettings

namespace kvpool::engine {

struct NetworkKvHandoffOptions {
  uint64_t max_write_bytes = uint64_t{8} << 20;
  uint64_t landing_bytes = uint64_t{64} << 20;  // per decode cache
  std::chrono::milliseconds timeout{30000};     // one request's handoff
  // Enabled: receivers serve their landing segments over UCX only (no shm) and senders write
  // them one-sided over it (transfer/ucx_transport.h).
  transfer::UcxSettings ucx;
};

std::unique_ptr<KvHandoff> NewNetworkKvHandoff(NetworkKvHandoffOptions options = {});

}  // namespace kvpool::engine
