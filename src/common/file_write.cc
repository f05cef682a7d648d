#include "common/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace kvpool {

Status WriteFileWhole(const std::string& path, std::string_view bytes) {
  const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable(fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temporary.c_str());
      return Unavailable(fmt::format("cannot write {}: {}", temporary, why));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    return Unavailable(fmt::format("cannot write {}: {}", path, why));
  }
  return Status::Ok();
}

Status CheckWritablePath(const std::string& path) {
  if (path.empty()) return InvalidArgument("no file named");
  const std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    return InvalidArgument(fmt::format("{}: folder {} does not exist", path, folder.string()));
  }
  if (std::filesystem::is_directory(path, error)) return InvalidArgument(fmt::format("{} is a folder", path));
  if (::access(folder.c_str(), W_OK) != 0) {
    return InvalidArgument(fmt::format("{}: cannot write in {}: {}", path, folder.string(), std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace kvpool
