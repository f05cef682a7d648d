// BlockIds: the block ids (`hash_ids`) of one prompt, one id per block_size tokens.
//
// An agent thread resends its conversation every turn with a little appended, so turn k+1's
// ids usually begin with all of turn k's. Storing each prompt's ids separately would cost
// ~2 GB for a 99K-request corpus (~142K tokens / 64 per request); instead the prompts of a
// thread share one append-only buffer and each BlockIds holds only its length. A corpus then
// costs about as much memory as it has *distinct* blocks.
//
// A BlockIds is immutable and cheap to copy. BlockIdsBuilder appends to a shared buffer, so
// it is for building a corpus single-threaded; once built, a corpus is safe to read from
// many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace kvpool::trace {

class BlockIds {
 public:
  BlockIds() = default;
  explicit BlockIds(std::vector<uint64_t> ids);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t operator[](size_t i) const { return (*buffer_)[i]; }
  std::span<const uint64_t> view() const {
    return buffer_ ? std::span<const uint64_t>(buffer_->data(), size_) : std::span<const uint64_t>();
  }
  const uint64_t* begin() const { return view().data(); }
  const uint64_t* end() const { return view().data() + size_; }

  // Two BlockIds with the same storage() share their first min(size) ids. Walkers use it to
  // remember how much of a buffer they have already visited (see reuse_ceiling.h); holding
  // the returned pointer keeps the buffer, and so its address, from being reused.
  std::shared_ptr<const void> storage() const { return buffer_; }

  // Equal ids in equal order; storage is irrelevant.
  friend bool operator==(const BlockIds& a, const BlockIds& b);

 private:
  friend class BlockIdsBuilder;
  BlockIds(std::shared_ptr<std::vector<uint64_t>> buffer, size_t size) : buffer_(std::move(buffer)), size_(size) {}

  // Invariant: size_ <= buffer_->size(); ids past size_ belong to later prompts.
  std::shared_ptr<std::vector<uint64_t>> buffer_;
  size_t size_ = 0;
};

// Builds the successive prompts of one thread, sharing storage between a prompt and the
// ones that extend it.
class BlockIdsBuilder {
 public:
  BlockIdsBuilder() : buffer_(std::make_shared<std::vector<uint64_t>>()) {}

  // The ids appended so far.
  std::span<const uint64_t> current() const { return *buffer_; }
  size_t size() const { return buffer_->size(); }

  void Append(uint64_t id) { buffer_->push_back(id); }
  void Append(std::span<const uint64_t> ids) { buffer_->insert(buffer_->end(), ids.begin(), ids.end()); }

  // A prompt holding the first `n` ids appended so far. REQUIRES: n <= size().
  BlockIds Prefix(size_t n) const { return BlockIds(buffer_, n); }
  BlockIds Snapshot() const { return Prefix(size()); }

  // Forgets the ids so far; later prompts use a new buffer (earlier snapshots keep theirs).
  // Used when a prompt diverges from the previous one.
  void Restart() { buffer_ = std::make_shared<std::vector<uint64_t>>(); }

  // A prompt with exactly `ids`, reusing this builder's storage when `ids` extends what was
  // appended so far or is a prefix of it; otherwise the builder restarts with `ids`.
  BlockIds Share(std::span<const uint64_t> ids);

 private:
  std::shared_ptr<std::vector<uint64_t>> buffer_;
};

}  // namespace kvpool::trace
