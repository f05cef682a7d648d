// "HOST:PORT" addresses as written on command lines and in pool configurations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvpool {

// OK for "HOST:PORT" with a non-empty host and a numeric port in 0..65535 ("[::1]:80" too);
// INVALID_ARGUMENT naming the text otherwise.
Status CheckHostPort(std::string_view text);
// Splits "HOST:PORT" ("[v6]:PORT" without its brackets); INVALID_ARGUMENT naming the address
// when it is not one.
Status SplitHostPort(std::string_view address, std::string* host, uint16_t* port);

}  // namespace kvpool
