// Human byte sizes on the command line: "4GiB", "512M", "64k", "1048576".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvpool {

// Parses a non-negative size. Suffixes (case-insensitive): k/K/KB/KiB, M/MB/MiB, G/GB/GiB,
// T/TB/TiB, all powers of 1024. Rejects empty input, junk, and values past 2^63.
Result<uint64_t> ParseByteSize(std::string_view text);

// "1.5 GiB", "64 KiB", "17 B".
std::string FormatByteSize(uint64_t bytes);

}  // namespace kvpool
