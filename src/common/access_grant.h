// AccessGrant: a master's permission for one tenant (common/tenant_claim.h) to read or write
// one range of one segment until a deadline, checked by the store that serves the range.
//
// A tenant may reach a store's tcp port (it proved its credential there), but the store knows
// nothing of keys: without grants it could read any offset, another namespace's KV included.
// So a master answering a tenant's lookup or put attaches to every replica a grant: an HMAC
// of (op, segment, range, expiry) under the pool's secret, which every store holds and no
// tenant does. The store serves a tenant's frame only inside a valid, unexpired grant for it
// (a large read split into frames stays inside its replica's grant). The pool's own secret
// needs no grants.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/shared_secret.h"
#include "common/status.h"

namespace kvpool {

// kReadTier: a read of the segment's store's SSD tier file, whose offsets are not the
// segment's (a grant for one never opens the other).
enum class GrantOp : uint8_t { kRead = 1, kWrite = 2, kReadTier = 3 };

struct AccessGrant {
  static constexpr size_t kWireSize = 40;  // expiry u64 | offset u64 | length u64 | mac 16 bytes (LE)
  // Stores accept a grant this long after its expiry, for clocks that differ between hosts.
  static constexpr int64_t kClockSkewMs = 2000;

  int64_t expiry_unix_ms = 0;  // 0: no grant
  uint64_t offset = 0, length = 0;
  std::array<uint8_t, 16> mac{};

  bool empty() const { return expiry_unix_ms == 0; }
};

// REQUIRES: `pool` is the pool's secret.
AccessGrant IssueGrant(const SharedSecret& pool, GrantOp op, uint64_t segment_id, uint64_t offset, uint64_t length,
                       int64_t expiry_unix_ms);
// OK when `grant` is the pool's for `op` on `segment_id`, covers [offset, offset + length) and
// has not expired at `now_unix_ms`; else PERMISSION_DENIED saying which.
Status CheckGrant(const SharedSecret& pool, const AccessGrant& grant, GrantOp op, uint64_t segment_id,
                  uint64_t offset, uint64_t length, int64_t now_unix_ms);

void EncodeGrant(const AccessGrant& grant, uint8_t out[AccessGrant::kWireSize]);
AccessGrant DecodeGrant(const uint8_t in[AccessGrant::kWireSize]);

}  // namespace kvpool
