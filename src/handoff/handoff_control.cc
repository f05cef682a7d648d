#include "handoff/handoff_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

#include "handoff/handoff_layouts.h"

namespace kvpool::handoff {
namespace {

constexpr size_t kHeaderBytes = 56;

void Put32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }  // x86-64 and aarch64: little-endian
void Put64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

int MillisLeft(ControlDeadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits until fd is ready for `events`; OK, or TIMEOUT / UNAVAILABLE.
Status WaitReady(int fd, short events, ControlDeadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return Status::Ok();  // readable, writable, or an error the next call reports
    if (n == 0) return Timeout("handoff control: the peer did not answer in time");
    if (errno != EINTR) return Unavailable(fmt::format("handoff control: poll: {}", std::strerror(errno)));
  }
}

Status SendAll(int fd, const std::byte* data, size_t n, ControlDeadline deadline) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      data += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KVPOOL_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, deadline));
      continue;
    }
    return Unavailable(fmt::format("handoff control: send: {}", std::strerror(errno)));
  }
  return Status::Ok();
}

Status ReceiveAll(int fd, std::byte* data, size_t n, ControlDeadline deadline) {
  while (n > 0) {
    const ssize_t got = ::recv(fd, data, n, MSG_DONTWAIT);
    if (got > 0) {
      data += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return Unavailable("handoff control: the peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      KVPOOL_RETURN_IF_ERROR(WaitReady(fd, POLLIN, deadline));
      continue;
    }
    return Unavailable(fmt::format("handoff control: recv: {}", std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace

Status SendControl(int fd, const ControlMessage& m, ControlDeadline deadline) {
  if (m.text.size() > kMaxControlText) return InvalidArgument("handoff control: message text too long");
  std::byte header[kHeaderBytes] = {};
  Put32(header, kControlMagic);
  header[4] = std::byte{kControlVersion};
  header[5] = static_cast<std::byte>(m.type);
  const auto code = static_cast<uint16_t>(m.code);
  std::memcpy(header + 6, &code, 2);
  Put32(header + 8, static_cast<uint32_t>(m.text.size()));
  Put64(header + 16, m.request_id);
  Put64(header + 24, m.a);
  Put64(header + 32, m.b);
  Put64(header + 40, m.c);
  Put64(header + 48, m.d);
  KVPOOL_RETURN_IF_ERROR(SendAll(fd, header, kHeaderBytes, deadline));
  return SendAll(fd, reinterpret_cast<const std::byte*>(m.text.data()), m.text.size(), deadline);
}

Result<ControlMessage> ReceiveControl(int fd, ControlDeadline deadline) {
  std::byte header[kHeaderBytes];
  KVPOOL_RETURN_IF_ERROR(ReceiveAll(fd, header, kHeaderBytes, deadline));
  if (Get32(header) != kControlMagic) return InvalidArgument("handoff control: bad magic (not a kvpool handoff peer?)");
  if (header[4] != std::byte{kControlVersion}) {
    return InvalidArgument(fmt::format("handoff control: version {} (this side speaks {})",
                                       static_cast<int>(header[4]), kControlVersion));
  }
  const auto type = static_cast<uint8_t>(header[5]);
  if (type < static_cast<uint8_t>(ControlType::kHello) || type > static_cast<uint8_t>(ControlType::kProof)) {
    return InvalidArgument(fmt::format("handoff control: unknown message type {}", type));
  }
  uint16_t code;
  std::memcpy(&code, header + 6, 2);
  if (code > static_cast<uint16_t>(kHighestStatusCode)) {
    return InvalidArgument(fmt::format("handoff control: unknown status code {}", code));
  }
  const uint32_t text_length = Get32(header + 8);
  if (text_length > kMaxControlText) {
    return InvalidArgument(fmt::format("handoff control: text of {} bytes is over the limit", text_length));
  }
  ControlMessage m;
  m.type = static_cast<ControlType>(type);
  m.code = static_cast<StatusCode>(code);
  m.request_id = Get64(header + 16);
  m.a = Get64(header + 24);
  m.b = Get64(header + 32);
  m.c = Get64(header + 40);
  m.d = Get64(header + 48);
  m.text.resize(text_length);
  KVPOOL_RETURN_IF_ERROR(ReceiveAll(fd, reinterpret_cast<std::byte*>(m.text.data()), text_length, deadline));
  return m;
}

uint64_t LayoutsFingerprint(const PrefillLayout& prefill, const DecodeLayout& decode) {
  std::string text = fmt::format("prefill kind={} bytes={} block={} layers=", static_cast<int>(prefill.kind),
                                 prefill.bytes_per_token_per_layer, prefill.block_tokens);
  for (uint32_t layers : prefill.stage_layers) text += fmt::format("{},", layers);
  text += fmt::format(" decode kind={} layers={} bytes={} block={} dcp={} interleave={}", static_cast<int>(decode.kind),
                      decode.num_layers, decode.bytes_per_token_per_layer, decode.block_tokens, decode.dcp_ranks,
                      decode.interleave);
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace kvpool::handoff
