// "HOST:PORT" addresses as written on command lines and in pool configurations.
#pragma once

#include <string_view>

#include "common/status.h"

namespace kvpool {

// OK for "HOST:PORT" with a non-empty host and a numeric port in 0..65535 ("[::1]:80" too);
// INVALID_ARGUMENT naming the text otherwise.
Status CheckHostPort(std::string_view text);

}  // namespace kvpool
