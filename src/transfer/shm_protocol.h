// The shm handshake (documented in README.md, "shm handshake"): a client asks a store's unix
// socket (SOCK_SEQPACKET) for a segment id and receives, with SCM_RIGHTS, the segment's memfd
// and a one-page "served flag" memfd (and, for a store with an SSD tier, the tier's file, which
// the client reads objects on SSD from: TransferRequest::from_tier). The flag page is how a client learns, without any
// socket on the data path, that the segment was withdrawn: the server clears it on Withdraw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/shared_secret.h"
#include "common/status.h"
#include "transfer/unique_fd.h"

namespace kvpool::transfer {

inline constexpr uint32_t kShmMagic = 0x5350564B;  // "KVPS" on the wire
inline constexpr uint8_t kShmVersion = 2;  // 2: the reply may carry the SSD tier's file
inline constexpr uint8_t kShmOpOpenSegment = 1;
inline constexpr size_t kShmRequestSize = 16;
inline constexpr size_t kShmReplySize = 32;

// Layout of the served-flag page: word 0 = 1 while served, 0 once withdrawn; word 1 = the
// segment id. Written only by the server; read with acquire loads by clients.
inline constexpr size_t kShmFlagPageSize = 4096;

inline bool ShmFlagSaysServed(const void* flag_page) {
  auto* word = const_cast<uint64_t*>(static_cast<const uint64_t*>(flag_page));
  return std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) == 1;
}
inline void ShmFlagSet(void* flag_page, uint64_t segment_id, bool served) {
  auto* words = static_cast<uint64_t*>(flag_page);
  std::atomic_ref<uint64_t>(words[1]).store(segment_id, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(words[0]).store(served ? 1 : 0, std::memory_order_release);
}

struct ShmGrant {
  UniqueFd segment_fd;
  UniqueFd flag_fd;
  uint64_t size = 0;
  UniqueFd tier_fd;         // the store's SSD tier file (read only); invalid when it has none
  uint64_t tier_size = 0;   // bytes of it clients may read; 0 when none
};

// Client side: one request/reply exchange, after proving `secret` when there is one
// (auth_handshake.h). STALE if the store does not serve the id; UNAVAILABLE if the socket
// does not answer within `timeout`; UNAUTHENTICATED if the store asks for a secret we lack,
// refuses ours, or does not ask while we hold one.
Result<ShmGrant> RequestShmGrant(const std::string& socket_path, uint64_t segment_id,
                                 std::chrono::milliseconds timeout, const SharedSecret* secret);
// Client side: reads the store's reply to a request for `segment_id` from a connected socket,
// with the fds it passes; `peer` names the store in messages. The store's code when it does not
// serve the id; INTERNAL for a reply that is not one: never a grant without both fds, nor one
// whose fds hold less than the size granted and a flag page (mapping them would fault), nor a
// tier size without a tier file that holds it.
// UNAVAILABLE when nothing could be read. Every fd received is closed unless granted.
Result<ShmGrant> ReadShmReply(int fd, uint64_t segment_id, std::string_view peer);

// Server side: reads one request from a connected socket.
Status ReadShmRequest(int fd, uint64_t* segment_id);
// Server side: replies; the fds are attached only when status is OK, the tier's only when
// `tier_fd` >= 0.
Status SendShmReply(int fd, StatusCode status, uint64_t segment_id, uint64_t size, int segment_fd, int flag_fd,
                    int tier_fd = -1, uint64_t tier_size = 0);

}  // namespace kvpool::transfer
