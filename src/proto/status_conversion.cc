#include "proto/status_conversion.h"

#include <fmt/format.h>

namespace kvpool {

Status FromProtoCode(proto::Code code, const std::string& message, std::string_view key) {
  if (code == proto::OK) return Status::Ok();
  const int value = static_cast<int>(code);
  const StatusCode status_code = (value >= 0 && value <= static_cast<int>(kHighestStatusCode))
                                     ? static_cast<StatusCode>(value)
                                     : StatusCode::kInternal;
  if (!message.empty()) return Status(status_code, message);
  return Status(status_code, fmt::format("key '{}'", key));
}

proto::Code ToProtoCode(StatusCode code) { return static_cast<proto::Code>(static_cast<int>(code)); }

Status FromGrpcStatus(const grpc::Status& status, std::string_view method, std::string_view address) {
  if (status.ok()) return Status::Ok();
  const std::string detail = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Timeout(fmt::format("master at {} did not answer {} in time", address, method));
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(fmt::format("master at {} unreachable ({}): {}", address, method, detail));
    case grpc::StatusCode::UNAUTHENTICATED:
      return Unauthenticated(fmt::format("master at {} refused {}: {}", address, method, detail));
    case grpc::StatusCode::PERMISSION_DENIED:
      return PermissionDenied(fmt::format("master at {} refused {}: {}", address, method, detail));
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return InvalidArgument(fmt::format("master rejected {}: {}", method, detail));
    default:
      return Internal(fmt::format("master call {} to {} failed (grpc code {}): {}", method, address,
                                  static_cast<int>(status.error_code()), detail));
  }
}

}  // namespace kvpool
