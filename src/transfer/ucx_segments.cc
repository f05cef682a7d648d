#include "transfer/ucx_segments.h"

#include <fmt/format.h>

#include "transfer/ucx_key.h"
#include "transfer/ucx_worker.h"

namespace kvpool::transfer {
namespace {

class Registration final : public UcxRegistration {
 public:
  Registration(UcxWorker* worker, ucp_mem_h memh, std::vector<uint8_t> reply)
      : worker_(worker), memh_(memh), reply_(std::move(reply)) {}
  ~Registration() override {
    worker_->Call([this] { ucp_mem_unmap(worker_->context(), memh_); });
  }
  const std::vector<uint8_t>& key_reply() const override { return reply_; }

 private:
  UcxWorker* const worker_;
  const ucp_mem_h memh_;
  const std::vector<uint8_t> reply_;
};

class UcxSegmentsImpl final : public UcxSegments {
 public:
  explicit UcxSegmentsImpl(std::unique_ptr<UcxWorker> worker) : worker_(std::move(worker)) {}

  Result<std::unique_ptr<UcxRegistration>> Register(void* base, uint64_t size) override {
    Status status;
    ucp_mem_h memh = nullptr;
    std::vector<uint8_t> reply;
    worker_->Call([&] {
      ucp_mem_map_params_t params{};
      params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      params.address = base;
      params.length = size;
      ucs_status_t s = ucp_mem_map(worker_->context(), &params, &memh);
      if (s != UCS_OK) {
        status = UcxStatus(fmt::format("registering {} bytes with UCX", size), s);
        return;
      }
      void* packed = nullptr;
      size_t packed_length = 0;
      s = ucp_rkey_pack(worker_->context(), memh, &packed, &packed_length);
      if (s != UCS_OK) {
        status = UcxStatus("packing a UCX remote key", s);
        ucp_mem_unmap(worker_->context(), memh);
        return;
      }
      UcxSegmentKey key;
      key.base = reinterpret_cast<uint64_t>(base);
      key.size = size;
      key.worker_address = worker_->address();
      key.rkey.assign(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + packed_length);
      ucp_rkey_buffer_release(packed);
      status = EncodeUcxKey(key, &reply);
      if (!status.ok()) ucp_mem_unmap(worker_->context(), memh);
    });
    if (!status.ok()) return status;
    return std::unique_ptr<UcxRegistration>(new Registration(worker_.get(), memh, std::move(reply)));
  }

  std::string Describe() const override {
    return worker_->Describe();
  }

 private:
  std::unique_ptr<UcxWorker> worker_;
};

}  // namespace

Result<std::unique_ptr<UcxSegments>> UcxSegments::Start(const UcxSettings& settings) {
  auto worker = UcxWorker::Start("ucx-store", settings);
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<UcxSegments>(new UcxSegmentsImpl(std::move(worker.value())));
}

}  // namespace kvpool::transfer
