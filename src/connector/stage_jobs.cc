#include "connector/stage_jobs.h"

#include <algorithm>

#include <fmt/format.h>

#include "connector/chunk_packing.h"

namespace kvpool::connector {

bool StageJobs::Request::BeginWrite() {
  std::lock_guard<std::mutex> lock(mu);
  if (cancelled) return false;
  ++writing;
  return true;
}

void StageJobs::Request::EndWrite() {
  std::lock_guard<std::mutex> lock(mu);
  --writing;
  changed.notify_all();
}

StageJobs::StageJobs(StageJobsOptions options, Body body, Finish finish)
    : options_(std::move(options)), body_(std::move(body)), finish_(std::move(finish)) {}

Result<std::unique_ptr<StageJobs>> StageJobs::Create(ChunkStore* store, const KvModelSpec& spec,
                                                     std::vector<StageDevice> devices, StageJobsOptions options,
                                                     Body body, Finish finish) {
  const std::string& noun = options.noun;
  if (devices.size() != spec.num_stages()) {
    return InvalidArgument(
        fmt::format("{} engine: {} stage devices for {} stages", noun, devices.size(), spec.num_stages()));
  }
  if (options.workers_per_stage == 0) return InvalidArgument(fmt::format("{} engine: workers_per_stage is 0", noun));
  std::unique_ptr<StageJobs> jobs(new StageJobs(options, std::move(body), std::move(finish)));
  for (uint32_t s = 0; s < devices.size(); ++s) {
    auto queue = std::make_unique<StageQueue>();
    Stage& stage = queue->stage;
    stage.index = s;
    stage.device = std::move(devices[s]);
    KVPOOL_RETURN_IF_ERROR(stage.device.cache.Validate());
    if (stage.device.cache.layout.packed_chunk_bytes(spec.chunk_tokens) != spec.stage_object_bytes(s)) {
      return InvalidArgument(fmt::format("{} engine: stage {} cache layout does not match the KV spec", noun, s));
    }
    stage.object_bytes = spec.stage_object_bytes(s);
    stage.slot_bytes = options.staging_bytes_per_stage / options.workers_per_stage;
    stage.slot_chunks = stage.slot_bytes / stage.object_bytes;
    if (stage.slot_chunks == 0) {
      return InvalidArgument(fmt::format("{} engine: stage {} staging share {} B is below one object ({} B)", noun,
                                         s, stage.slot_bytes, stage.object_bytes));
    }
    auto staging = StagingBuffer::Allocate(store, options.staging_bytes_per_stage, stage.device.cuda_device);
    if (!staging.ok()) return staging.status();
    stage.staging = std::move(staging.value());
    jobs->stages_.push_back(std::move(queue));
  }
  for (auto& stage : jobs->stages_) {
    for (uint32_t w = 0; w < options.workers_per_stage; ++w) {
      stage->workers.emplace_back([j = jobs.get(), st = stage.get(), w] { j->WorkerLoop(st, w); });
    }
  }
  return jobs;
}

StageJobs::~StageJobs() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, r] : requests_) {
      std::lock_guard<std::mutex> request_lock(r->mu);
      r->cancelled = true;  // a job waiting on its request (a save's stage for its turn) stops
      r->changed.notify_all();
    }
  }
  for (auto& stage : stages_) stage->wake.notify_all();
  for (auto& stage : stages_) {
    for (std::thread& t : stage->workers) t.join();
  }
}

Status StageJobs::Add(std::shared_ptr<Request> request, std::span<const uint64_t> jobs_per_stage) {
  const std::string& noun = options_.noun;
  const uint64_t id = request->id;
  request->jobs = 0;
  for (uint64_t n : jobs_per_stage) request->jobs += n;
  request->jobs_pending = request->jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (requests_.count(id)) {
      return AlreadyExists(fmt::format("{} {}: a {} with this id is in progress", noun, id, noun));
    }
    if (requests_.size() >= options_.max_requests) {
      return Unavailable(fmt::format("{} {}: {} {}s pending", noun, id, requests_.size(), noun));
    }
    for (uint32_t s = 0; s < stages_.size(); ++s) {
      if (stages_[s]->queue.size() + jobs_per_stage[s] > options_.max_queued_jobs_per_stage) {
        return Unavailable(fmt::format("{} {}: stage {} {} queue is full", noun, id, s, noun));
      }
    }
    requests_[id] = request;
    for (uint32_t s = 0; s < stages_.size(); ++s) {
      for (uint64_t i = 0; i < jobs_per_stage[s]; ++i) stages_[s]->queue.push_back(Job{request, s, i});
    }
  }
  for (auto& stage : stages_) stage->wake.notify_all();
  return Status::Ok();
}

void StageJobs::WorkerLoop(StageQueue* stage, uint32_t worker) {
  std::unique_ptr<ChunkPacker> packer;
  Worker w;
  w.stage = &stage->stage;
  if (stage->stage.device.cuda_device >= 0) {
    auto p = NewCudaChunkPacker(stage->stage.device.cuda_device);
    if (p.ok()) {
      packer = std::move(p.value());
    } else {
      w.packer_status = p.status();
    }
  } else {
    packer = NewCpuChunkPacker();
  }
  w.packer = packer.get();
  w.slot = stage->stage.staging->data() + worker * stage->stage.slot_bytes;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stage->wake.wait(lock, [&] { return stopping_ || !stage->queue.empty(); });
      if (stopping_) return;
      job = std::move(stage->queue.front());
      stage->queue.pop_front();
      ++running_;
    }
    body_(job, w);
    {
      Request& r = *job.request;
      std::lock_guard<std::mutex> lock(r.mu);
      --r.jobs_pending;
      r.changed.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    idle_.notify_all();
  }
}

void StageJobs::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] {
    if (running_ > 0) return false;
    for (const auto& stage : stages_) {
      if (!stage->queue.empty()) return false;
    }
    return true;
  });
}

std::shared_ptr<StageJobs::Request> StageJobs::Find(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second;
}

StageJobs::Answer StageJobs::Take(std::shared_ptr<Request> r, std::unique_lock<std::mutex>& lock,
                                  Clock::time_point writes_deadline) {
  if (r->taken) return {State::kUnknown, nullptr};  // another call is handing it out
  bool ran_out = false;
  if (r->jobs_pending > 0) {
    if (Clock::now() < r->deadline) return {State::kRunning, nullptr};
    // Its own deadline passed: cancel, then wait only for the writes already under way.
    r->cancelled = true;
    auto writes_done = [&] { return r->writing == 0 || r->taken; };
    if (!writes_done() && !r->changed.wait_until(lock, writes_deadline, writes_done)) {
      return {State::kRunning, nullptr};
    }
    if (r->taken) return {State::kUnknown, nullptr};
    ran_out = true;
  }
  r->taken = true;
  r->cancelled = true;  // late jobs of a request that ran out must not write any more
  finish_(*r, ran_out);
  r->changed.notify_all();
  lock.unlock();
  {
    std::lock_guard<std::mutex> table_lock(mu_);
    requests_.erase(r->id);
  }
  return {State::kFinished, std::move(r)};
}

StageJobs::Answer StageJobs::Poll(uint64_t id) {
  std::shared_ptr<Request> r = Find(id);
  if (!r) return {State::kUnknown, nullptr};
  std::unique_lock<std::mutex> lock(r->mu);
  return Take(std::move(r), lock, Clock::now());  // waits for no write
}

StageJobs::Answer StageJobs::Wait(uint64_t id, Clock::time_point deadline) {
  std::shared_ptr<Request> r = Find(id);
  if (!r) return {State::kUnknown, nullptr};
  std::unique_lock<std::mutex> lock(r->mu);
  r->changed.wait_until(lock, std::min(deadline, r->deadline), [&] { return r->jobs_pending == 0 || r->taken; });
  return Take(std::move(r), lock, deadline);
}

}  // namespace kvpool::connector
