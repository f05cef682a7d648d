// UCX entry points of a build without UCX (-DKVPOOL_UCX=OFF or no libucx-dev): each says so.
#include "transfer/ucx_segments.h"
#include "transfer/ucx_transport.h"

namespace kvpool::transfer {
namespace {
Status NotBuilt() {
  return Unavailable("this kvpool was built without UCX (install libucx-dev and build with -DKVPOOL_UCX=ON)");
}
}  // namespace

bool UcxBuilt() { return false; }

Result<std::unique_ptr<UcxSegments>> UcxSegments::Start(const UcxSettings&) { return NotBuilt(); }

Result<std::unique_ptr<UcxTransport>> UcxTransport::Start(const TransferOptions&, Transport*) { return NotBuilt(); }

}  // namespace kvpool::transfer
