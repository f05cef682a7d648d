#include "common/access_grant.h"

#include <fmt/format.h>

#include <cstring>

namespace kvpool {
namespace {

void PutLe(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetLe(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{in[i]} << (8 * i);
  return v;
}

std::array<uint8_t, 16> Mac(const SharedSecret& pool, GrantOp op, uint64_t segment_id, uint64_t offset,
                            uint64_t length, int64_t expiry_unix_ms) {
  const SharedSecret::Proof full = pool.Prove(
      fmt::format("kvpool-grant\n{}\n{}\n{}\n{}\n{}", static_cast<int>(op), segment_id, offset, length, expiry_unix_ms),
      SharedSecret::Challenge{});
  std::array<uint8_t, 16> mac;
  std::memcpy(mac.data(), full.data(), mac.size());
  return mac;
}

}  // namespace

AccessGrant IssueGrant(const SharedSecret& pool, GrantOp op, uint64_t segment_id, uint64_t offset, uint64_t length,
                       int64_t expiry_unix_ms) {
  return {expiry_unix_ms, offset, length, Mac(pool, op, segment_id, offset, length, expiry_unix_ms)};
}

Status CheckGrant(const SharedSecret& pool, const AccessGrant& grant, GrantOp op, uint64_t segment_id,
                  uint64_t offset, uint64_t length, int64_t now_unix_ms) {
  const char* what = op == GrantOp::kRead ? "read" : op == GrantOp::kWrite ? "write" : "tier read";
  if (grant.empty()) return PermissionDenied(fmt::format("a tenant's {} needs the master's grant; none came", what));
  const std::array<uint8_t, 16> expected =
      Mac(pool, op, segment_id, grant.offset, grant.length, grant.expiry_unix_ms);
  if (!ConstantTimeEqual(std::string_view(reinterpret_cast<const char*>(expected.data()), expected.size()),
                         std::string_view(reinterpret_cast<const char*>(grant.mac.data()), grant.mac.size()))) {
    return PermissionDenied(fmt::format("the grant for this {} of segment {} is not the master's", what, segment_id));
  }
  if (offset < grant.offset || length > grant.length || offset - grant.offset > grant.length - length) {
    return PermissionDenied(fmt::format("{} of [{}, +{}) is outside its grant [{}, +{})", what, offset, length,
                                        grant.offset, grant.length));
  }
  if (now_unix_ms - AccessGrant::kClockSkewMs > grant.expiry_unix_ms) {  // `now` is sane; the expiry came off the wire
    return PermissionDenied(fmt::format("the grant for this {} expired {} ms ago", what,
                                        now_unix_ms - grant.expiry_unix_ms));
  }
  return Status::Ok();
}

void EncodeGrant(const AccessGrant& grant, uint8_t out[AccessGrant::kWireSize]) {
  PutLe(out, static_cast<uint64_t>(grant.expiry_unix_ms));
  PutLe(out + 8, grant.offset);
  PutLe(out + 16, grant.length);
  std::memcpy(out + 24, grant.mac.data(), grant.mac.size());
}

AccessGrant DecodeGrant(const uint8_t in[AccessGrant::kWireSize]) {
  AccessGrant grant;
  grant.expiry_unix_ms = static_cast<int64_t>(GetLe(in));
  grant.offset = GetLe(in + 8);
  grant.length = GetLe(in + 16);
  std::memcpy(grant.mac.data(), in + 24, grant.mac.size());
  return grant;
}

}  // namespace kvpool
