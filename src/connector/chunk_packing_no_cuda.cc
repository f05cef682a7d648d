// Built when KVPOOL_CUDA is OFF: GPU packing is reported unavailable, callers use the CPU packer.
#include "connector/chunk_packing.h"

namespace kvpool::connector {

Result<std::unique_ptr<ChunkPacker>> NewCudaChunkPacker(int device) {
  return Unavailable("kvpool was built without KVPOOL_CUDA: no GPU packer (use the CPU packer)");
}

int CudaDeviceCount() { return 0; }

}  // namespace kvpool::connector
