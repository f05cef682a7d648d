#include "transfer/ucx_key.h"

#include <fmt/format.h>

#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {
constexpr size_t kHeaderBytes = 32;
}  // namespace

Status EncodeUcxKey(const UcxSegmentKey& key, std::vector<uint8_t>* out) {
  const uint64_t used = kHeaderBytes + key.worker_address.size() + key.rkey.size();
  if (used > kUcxKeyBytes) {
    return InvalidArgument(fmt::format("a UCX address of {} bytes and key of {} bytes do not fit in {} bytes",
                                       key.worker_address.size(), key.rkey.size(), kUcxKeyBytes));
  }
  out->assign(kUcxKeyBytes, 0);
  uint8_t* p = out->data();
  PutField<uint32_t>(p, 0, kUcxKeyMagic);
  p[4] = kUcxKeyVersion;
  PutField<uint64_t>(p, 8, key.base);
  PutField<uint64_t>(p, 16, key.size);
  PutField<uint32_t>(p, 24, static_cast<uint32_t>(key.worker_address.size()));
  PutField<uint32_t>(p, 28, static_cast<uint32_t>(key.rkey.size()));
  std::copy(key.worker_address.begin(), key.worker_address.end(), p + kHeaderBytes);
  std::copy(key.rkey.begin(), key.rkey.end(), p + kHeaderBytes + key.worker_address.size());
  return Status::Ok();
}

Status DecodeUcxKey(std::span<const uint8_t> in, UcxSegmentKey* key) {
  if (in.size() != kUcxKeyBytes) {
    return InvalidArgument(fmt::format("a UCX key reply is {} bytes, not {}", kUcxKeyBytes, in.size()));
  }
  const uint8_t* p = in.data();
  if (GetField<uint32_t>(p, 0) != kUcxKeyMagic) return InvalidArgument("bad UCX key magic");
  if (p[4] != kUcxKeyVersion) return InvalidArgument(fmt::format("unsupported UCX key version {}", p[4]));
  if (p[5] != 0 || p[6] != 0 || p[7] != 0) return InvalidArgument("reserved UCX key bytes set");
  const uint64_t base = GetField<uint64_t>(p, 8);
  const uint64_t size = GetField<uint64_t>(p, 16);
  const uint64_t address_length = GetField<uint32_t>(p, 24);
  const uint64_t rkey_length = GetField<uint32_t>(p, 28);
  if (address_length == 0 || rkey_length == 0) return InvalidArgument("a UCX key without an address or key");
  if (kHeaderBytes + address_length + rkey_length > kUcxKeyBytes) {
    return InvalidArgument("UCX key lengths run past the reply");
  }
  if (size == 0 || base + size < base) return InvalidArgument(fmt::format("bad UCX segment range {:#x} + {}", base, size));
  key->base = base;
  key->size = size;
  key->worker_address.assign(p + kHeaderBytes, p + kHeaderBytes + address_length);
  key->rkey.assign(p + kHeaderBytes + address_length, p + kHeaderBytes + address_length + rkey_length);
  return Status::Ok();
}

}  // namespace kvpool::transfer
