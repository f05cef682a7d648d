#include "common/host_port.h"

#include <string>

#include <fmt/format.h>

namespace kvpool {

Status CheckHostPort(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return InvalidArgument("expected HOST:PORT, got '" + std::string(text) + "'");
  const std::string_view port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) > 65535)
    return InvalidArgument("port in '" + std::string(text) + "' must be a number from 0 to 65535");
  return Status::Ok();
}

Status SplitHostPort(std::string_view address, std::string* host, uint16_t* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument(fmt::format("address '{}' is not host:port", address));
  }
  std::string_view h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  uint32_t p = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9') return InvalidArgument(fmt::format("bad port in '{}'", address));
    p = p * 10 + static_cast<uint32_t>(c - '0');
    if (p > 65535) return InvalidArgument(fmt::format("port out of range in '{}'", address));
  }
  *host = std::string(h);
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

}  // namespace kvpool
