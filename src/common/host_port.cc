#include "common/host_port.h"

#include <string>

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

}  // namespace kvpool
