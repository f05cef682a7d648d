// Status and Result<T>: errors are values, never exceptions across module boundaries.
// A Status carries a code a program can branch on and a message a person can act on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvpool {

// Values match proto::Code so a code crosses the wire as an integer unchanged.
enum class StatusCode : int {
  kOk = 0,
  kNotFound = 1,
  kAlreadyExists = 2,
  kInvalidArgument = 3,
  kNoSpace = 4,
  kLeased = 5,
  kTimeout = 6,
  kUnavailable = 7,
  kInternal = 8,
  kNotReady = 9,
  kStale = 10,
  // The bytes read do not match the checksum their writer recorded (common/checksum.h):
  // never used; the caller treats the object as missing.
  kCorrupt = 11,
  // The peer did not prove it holds the pool's secret (common/shared_secret.h), or asked one
  // that does not hold it.
  kUnauthenticated = 12,
  kPermissionDenied = 13,  // proven, but this credential may not use what was asked for
};
// The highest code: decoders of codes from the wire refuse anything above it.
inline constexpr StatusCode kHighestStatusCode = StatusCode::kPermissionDenied;

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NOT_FOUND: key 'abc' is not in the pool"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
inline Status Leased(std::string m) { return {StatusCode::kLeased, std::move(m)}; }
inline Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status NotReady(std::string m) { return {StatusCode::kNotReady, std::move(m)}; }
inline Status Stale(std::string m) { return {StatusCode::kStale, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }

// A value or the Status explaining why there is none. REQUIRES: an error Status is not ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kvpool

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define KVPOOL_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::kvpool::Status _kv_st = (expr);         \
    if (!_kv_st.ok()) return _kv_st;          \
  } while (0)
