#include "engine/kv_admission_gate.h"

#include <algorithm>

namespace kvpool::engine {

bool KvAdmissionGate::Admit(uint64_t request_id, uint64_t tokens) {
  if (waiting_.empty() && reserved_ + tokens <= capacity_) {
    reserved_ += tokens;
    return true;
  }
  waiting_.push_back({request_id, tokens});
  waiting_tokens_ += tokens;
  return false;
}

std::vector<uint64_t> KvAdmissionGate::Release(uint64_t tokens) {
  reserved_ -= std::min(tokens, reserved_);
  std::vector<uint64_t> admitted;
  while (!waiting_.empty() && reserved_ + waiting_.front().tokens <= capacity_) {
    reserved_ += waiting_.front().tokens;
    waiting_tokens_ -= waiting_.front().tokens;
    admitted.push_back(waiting_.front().id);
    waiting_.pop_front();
  }
  return admitted;
}

bool KvAdmissionGate::Cancel(uint64_t request_id, std::vector<uint64_t>* admitted) {
  auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiter& w) { return w.id == request_id; });
  if (it == waiting_.end()) return false;
  waiting_tokens_ -= it->tokens;
  waiting_.erase(it);
  const std::vector<uint64_t> now_fit = Release(0);  // the cancelled one may have blocked the head
  admitted->insert(admitted->end(), now_fit.begin(), now_fit.end());
  return true;
}

}  // namespace kvpool::engine
