// ReadTierFile: reads a range of a store's SSD tier file (ssd/tier_file.h) into any memory.
//
// The file may be open with O_DIRECT (the tier keeps its bytes out of the page cache), which
// takes only block-aligned offsets, lengths and buffers; a caller's range and buffer are
// neither. So the range is read in aligned pieces through a buffer of this thread's and each
// piece copied out (and hashed, while it is still in cache). The same holds for a file open
// without O_DIRECT. Used by the shm channel (a same-host client reads the file itself) and by
// the segment server (a tcp client's tier read).
#pragma once

#include <cstdint>

#include "common/checksum.h"
#include "common/status.h"
#include "transfer/access_gate.h"

namespace kvpool::transfer {

// Reads [offset, offset + length) of `fd` into `out`, updating `hash` (may be null) with the
// bytes in order. With `gate`, `out` is touched only inside its sections, one piece at a time
// (the disk reads happen outside), and a closed gate ends the read with TIMEOUT. The errno of
// a failed read (INTERNAL), or INVALID_ARGUMENT when the range runs past the file's end.
Status ReadTierFile(int fd, uint64_t offset, char* out, uint64_t length, ChecksumStream* hash,
                    AccessGate* gate = nullptr);

}  // namespace kvpool::transfer
