// A store's answer to a UCX key request (transfer/ucx_key.h), as the client decodes it before
// handing the address and key to UCX.
// Input: the reply's bytes (any length; only kUcxKeyBytes can decode).
// Checked: an accepted key has an address and a key inside the reply, a range that does not
// wrap, and encodes back to a reply that decodes to the same key.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "transfer/ucx_key.h"

using namespace kvpool::transfer;

namespace {
void Require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  UcxSegmentKey key;
  if (!DecodeUcxKey(std::span<const uint8_t>(data, size), &key).ok()) return 0;
  Require(size == kUcxKeyBytes);
  Require(!key.worker_address.empty() && !key.rkey.empty());
  Require(32 + key.worker_address.size() + key.rkey.size() <= kUcxKeyBytes);
  Require(key.size > 0 && key.base + key.size > key.base);
  std::vector<uint8_t> again;
  Require(EncodeUcxKey(key, &again).ok());
  UcxSegmentKey back;
  Require(DecodeUcxKey(again, &back).ok());
  Require(back.base == key.base && back.size == key.size && back.worker_address == key.worker_address &&
          back.rkey == key.rkey);
  return 0;
}
