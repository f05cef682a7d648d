// Writing a file whole: readers (a metrics collector, a script) see the old contents or the
// new, never a half-written file.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace kvpool {

// Writes `bytes` to a temporary file beside `path` and renames it over `path`. UNAVAILABLE
// naming the path and the reason when it cannot; the temporary file is removed then.
Status WriteFileWhole(const std::string& path, std::string_view bytes);
// OK when a file could be written at `path` (its folder exists and is writable), else
// INVALID_ARGUMENT saying why: for checking a flag before a long run, not after it.
Status CheckWritablePath(const std::string& path);

}  // namespace kvpool
