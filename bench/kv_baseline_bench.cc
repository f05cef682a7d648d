// Baselines for the pool benchmark: SET/GET throughput of redis-server (RESP) and memcached
// (text protocol) over a unix socket, pipelined, measured the way `kvpool bench` measures the
// pool (same value sizes, same batch = pipeline depth, stamps checked on every read).
//
// usage: kvpool_kv_baseline_bench --redis SOCKET | --memcached SOCKET
//          [--value-size BYTES] [--bytes BYTES] [--batch N] [--repeat N]
// Prints one JSON object per run: {"system", "value_size", "set_gbps", "get_gbps", ...}.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

class UnixConnection {
 public:
  explicit UnixConnection(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot connect to " + path + ": " + std::strerror(errno));
    int size = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
  ~UnixConnection() { close(fd_); }

  // Sends all of `parts` (header strings and value bytes interleaved, no copy of values).
  void Send(std::vector<iovec> parts) {
    size_t index = 0;
    while (index < parts.size()) {
      const int count = static_cast<int>(std::min<size_t>(parts.size() - index, 512));
      ssize_t n = writev(fd_, &parts[index], count);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("write: ") + std::strerror(errno));
      }
      while (n > 0 && index < parts.size()) {
        if (static_cast<size_t>(n) >= parts[index].iov_len) {
          n -= static_cast<ssize_t>(parts[index].iov_len);
          ++index;
        } else {
          parts[index].iov_base = static_cast<char*>(parts[index].iov_base) + n;
          parts[index].iov_len -= static_cast<size_t>(n);
          n = 0;
        }
      }
    }
  }

  std::string ReadLine() {
    for (;;) {
      const auto end = buffer_.find("\r\n", start_);
      if (end != std::string::npos) {
        std::string line = buffer_.substr(start_, end - start_);
        start_ = end + 2;
        return line;
      }
      Fill();
    }
  }

  // Reads exactly n bytes into dst: first what is buffered, the rest straight from the socket.
  void ReadExact(char* dst, size_t n) {
    const size_t buffered = std::min(n, buffer_.size() - start_);
    std::memcpy(dst, buffer_.data() + start_, buffered);
    start_ += buffered;
    size_t done = buffered;
    while (done < n) {
      ssize_t r = read(fd_, dst + done, n - done);
      if (r <= 0) throw std::runtime_error("connection closed mid-value");
      done += static_cast<size_t>(r);
    }
  }

 private:
  void Fill() {
    if (start_ > 0) {
      buffer_.erase(0, start_);
      start_ = 0;
    }
    char chunk[65536];
    ssize_t r = read(fd_, chunk, sizeof chunk);
    if (r <= 0) throw std::runtime_error("connection closed");
    buffer_.append(chunk, static_cast<size_t>(r));
  }

  int fd_;
  std::string buffer_;
  size_t start_ = 0;
};

iovec Io(const std::string& s) { return {const_cast<char*>(s.data()), s.size()}; }
iovec Io(char* p, size_t n) { return {p, n}; }

struct Protocol {
  virtual ~Protocol() = default;
  // Headers owned by `scratch` (reserved by the caller so pointers stay valid).
  virtual void AppendSet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key,
                         char* value, size_t size) = 0;
  virtual void ReadSetReply(UnixConnection& c) = 0;
  virtual void AppendGet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key) = 0;
  virtual void ReadGetReply(UnixConnection& c, char* dst, size_t size) = 0;
};

struct Redis : Protocol {
  void AppendSet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key, char* value,
                 size_t size) override {
    scratch.push_back(fmt::format("*3\r\n$3\r\nSET\r\n${}\r\n{}\r\n${}\r\n", key.size(), key, size));
    out.push_back(Io(scratch.back()));
    out.push_back(Io(value, size));
    out.push_back(Io(crlf));
  }
  void ReadSetReply(UnixConnection& c) override {
    const std::string line = c.ReadLine();
    if (line != "+OK") throw std::runtime_error("redis SET answered " + line);
  }
  void AppendGet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key) override {
    scratch.push_back(fmt::format("*2\r\n$3\r\nGET\r\n${}\r\n{}\r\n", key.size(), key));
    out.push_back(Io(scratch.back()));
  }
  void ReadGetReply(UnixConnection& c, char* dst, size_t size) override {
    const std::string line = c.ReadLine();
    if (line != "$" + std::to_string(size)) throw std::runtime_error("redis GET answered " + line);
    c.ReadExact(dst, size);
    c.ReadLine();
  }
  std::string crlf = "\r\n";
};

struct Memcached : Protocol {
  void AppendSet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key, char* value,
                 size_t size) override {
    scratch.push_back(fmt::format("set {} 0 0 {}\r\n", key, size));
    out.push_back(Io(scratch.back()));
    out.push_back(Io(value, size));
    out.push_back(Io(crlf));
  }
  void ReadSetReply(UnixConnection& c) override {
    const std::string line = c.ReadLine();
    if (line != "STORED") throw std::runtime_error("memcached set answered " + line);
  }
  void AppendGet(std::vector<iovec>& out, std::vector<std::string>& scratch, const std::string& key) override {
    scratch.push_back(fmt::format("get {}\r\n", key));
    out.push_back(Io(scratch.back()));
  }
  void ReadGetReply(UnixConnection& c, char* dst, size_t size) override {
    const std::string line = c.ReadLine();
    if (line.rfind("VALUE ", 0) != 0) throw std::runtime_error("memcached get answered " + line);
    c.ReadExact(dst, size);
    c.ReadLine();
    if (c.ReadLine() != "END") throw std::runtime_error("memcached get: missing END");
  }
  std::string crlf = "\r\n";
};

uint64_t ParseSize(const std::string& s) {
  size_t pos = 0;
  uint64_t v = std::stoull(s, &pos);
  const std::string unit = s.substr(pos);
  if (unit == "KiB" || unit == "K" || unit == "k") return v << 10;
  if (unit == "MiB" || unit == "M") return v << 20;
  if (unit == "GiB" || unit == "G") return v << 30;
  if (!unit.empty()) throw std::invalid_argument("unknown unit in " + s);
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string system, socket_path;
  uint64_t value_size = 1 << 20, bytes = uint64_t{256} << 20;
  int batch = 8, repeat = 3;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--redis" || flag == "--memcached") {
        system = flag.substr(2);
        socket_path = value;
      } else if (flag == "--value-size") {
        value_size = ParseSize(value);
      } else if (flag == "--bytes") {
        bytes = ParseSize(value);
      } else if (flag == "--batch") {
        batch = std::stoi(value);
      } else if (flag == "--repeat") {
        repeat = std::stoi(value);
      } else {
        throw std::invalid_argument("unknown flag " + flag);
      }
    }
    if (system.empty() || value_size < 16 || batch < 1 || repeat < 1)
      throw std::invalid_argument("need --redis SOCKET or --memcached SOCKET, --value-size >= 16");
  } catch (const std::exception& e) {
    fmt::print(stderr, "kvpool_kv_baseline_bench: {}\n", e.what());
    return 2;
  }
  Redis redis;
  Memcached memcached;
  Protocol& protocol = system == "redis" ? static_cast<Protocol&>(redis) : memcached;
  try {
    UnixConnection conn(socket_path);
    const uint64_t batches = std::max<uint64_t>(1, bytes / value_size / batch);
    const uint64_t moved = batches * batch * value_size;
    std::vector<char> put(value_size * batch, 'p'), got(value_size * batch);
    std::vector<double> set_gbps, get_gbps;
    using Clock = std::chrono::steady_clock;
    // Every repetition writes the same keys, so after the first (a warm-up, not counted) the
    // server reuses memory it already touched, as kvpool's pre-faulted segment does.
    auto key = [](uint64_t object) { return fmt::format("bench:{}", object); };
    for (int rep = -1; rep < repeat; ++rep) {
      auto t0 = Clock::now();
      for (uint64_t b = 0; b < batches; ++b) {
        std::vector<iovec> parts;
        std::vector<std::string> scratch;
        scratch.reserve(batch);
        for (int i = 0; i < batch; ++i) {
          const uint64_t object = b * batch + i;
          char* v = put.data() + i * value_size;
          std::memcpy(v, &object, 8);
          std::memcpy(v + value_size - 8, &object, 8);
          protocol.AppendSet(parts, scratch, key(object), v, value_size);
        }
        conn.Send(parts);
        for (int i = 0; i < batch; ++i) protocol.ReadSetReply(conn);
      }
      const double set_rate = static_cast<double>(moved) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
      t0 = Clock::now();
      for (uint64_t b = 0; b < batches; ++b) {
        std::vector<iovec> parts;
        std::vector<std::string> scratch;
        scratch.reserve(batch);
        for (int i = 0; i < batch; ++i) protocol.AppendGet(parts, scratch, key(b * batch + i));
        conn.Send(parts);
        for (int i = 0; i < batch; ++i) {
          char* dst = got.data() + i * value_size;
          protocol.ReadGetReply(conn, dst, value_size);
          uint64_t head, tail;
          std::memcpy(&head, dst, 8);
          std::memcpy(&tail, dst + value_size - 8, 8);
          if (head != b * batch + i || tail != head) throw std::runtime_error("wrong bytes read back");
        }
      }
      const double get_rate = static_cast<double>(moved) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
      if (rep >= 0) {
        set_gbps.push_back(set_rate);
        get_gbps.push_back(get_rate);
      }
    }
    fmt::print("{{\"system\": \"{}\", \"value_size\": {}, \"batch\": {}, \"bytes_per_phase\": {}, \"repeat\": {}, "
               "\"set_gbps\": {:.4f}, \"get_gbps\": {:.4f}}}\n",
               system, value_size, batch, moved, repeat, Median(set_gbps), Median(get_gbps));
  } catch (const std::exception& e) {
    fmt::print(stderr, "kvpool_kv_baseline_bench ({}): {}\n", system, e.what());
    return 1;
  }
  return 0;
}
