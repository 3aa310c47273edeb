#include "runtime/proxy/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/proxy/crc32c_fast.h"

namespace orrery::runtime {
namespace {

constexpr char kMagic[8] = {'O', 'R', 'Y', 'S', 'H', 'R', 'D', '1'};
constexpr char kEnd[4] = {'E', 'N', 'D', '!'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint64_t kFixed = 8 + 4 * 4 + 8 * 3 + 4 * 2 + 8 * 2;
constexpr std::uint32_t kMaxEntries = 1u << 20;
constexpr std::uint64_t kChunk = 1u << 20;

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const unsigned char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

Status write_all(int fd, const void* p, std::uint64_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Error("write " + path + ": " + std::strerror(errno));
    }
    c += w;
    n -= static_cast<std::uint64_t>(w);
  }
  return Status::Ok();
}

Status read_all(int fd, void* p, std::uint64_t n, const std::string& path) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n > (1u << 30) ? (1u << 30) : n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Status::Error(path + ": truncated shard");
    c += r;
    n -= static_cast<std::uint64_t>(r);
  }
  return Status::Ok();
}

}  // namespace

std::string shard_file(const std::string& ckpt_dir, std::int64_t job, std::int64_t step, int rank) {
  return ckpt_dir + "/job-" + std::to_string(job) + "/step-" + std::to_string(step) + "/rank-" +
         std::to_string(rank) + ".ckpt";
}

Result<ShardWriter> ShardWriter::open(const std::string& path, const ShardMeta& m) {
  std::string head;
  head.append(kMagic, 8);
  put<std::uint32_t>(head, kVersion);
  put<std::uint32_t>(head, static_cast<std::uint32_t>(m.allocs.size()));
  put<std::uint32_t>(head, static_cast<std::uint32_t>(m.state_lens.size()));
  put<std::uint32_t>(head, 0);
  put(head, m.job);
  put(head, m.epoch);
  put(head, m.step);
  put(head, m.rank);
  put(head, m.world);
  put(head, m.next_offset);
  put(head, m.alloc_seq);
  std::uint64_t payload = 0;
  for (const auto& a : m.allocs) {
    put(head, a.addr);
    put(head, a.size);
    put(head, a.seq);
    payload += a.size;
  }
  for (auto l : m.state_lens) {
    put(head, l);
    payload += l;
  }

  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Status::Error("cannot create the directory of " + path + ": " + ec.message());
  ShardWriter w;
  w.path_ = path;
  w.tmp_ = path + ".tmp";
  w.fd_ = ::open(w.tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) return Status::Error("open " + w.tmp_ + ": " + std::strerror(errno));
  w.crc_ = crc32c_fast_extend(0, head.data(), head.size());
  w.expected_ = head.size() + payload;
  if (auto s = write_all(w.fd_, head.data(), head.size(), w.tmp_); !s) return s;
  w.total_ = head.size();
  return w;
}

ShardWriter::ShardWriter(ShardWriter&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), crc_(o.crc_),
      total_(o.total_), expected_(o.expected_) {
  o.fd_ = -1;
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

// Checksum and write chunk by chunk, so each chunk is checksummed while it is in cache.
Status ShardWriter::append(const void* p, std::uint64_t n) {
  if (fd_ < 0) return Status::Error("shard " + path_ + ": append after finish");
  if (n > expected_ - total_) {
    return Status::Error("shard " + path_ + ": more bytes than its table announces");
  }
  const auto* c = static_cast<const char*>(p);
  for (std::uint64_t off = 0; off < n; off += kChunk) {
    const std::uint64_t k = std::min(kChunk, n - off);
    crc_ = crc32c_fast_extend(crc_, c + off, k);
    if (auto s = write_all(fd_, c + off, k, tmp_); !s) return s;
  }
  total_ += n;
  return Status::Ok();
}

Result<std::uint64_t> ShardWriter::finish() {
  if (fd_ < 0) return Status::Error("shard " + path_ + ": finished twice");
  if (total_ != expected_) {
    return Status::Error("shard " + path_ + ": " + std::to_string(total_) + " bytes written, " +
                         std::to_string(expected_) + " announced");
  }
  std::string tail;
  put(tail, crc_);
  tail.append(kEnd, 4);
  Status s = write_all(fd_, tail.data(), tail.size(), tmp_);
  if (s && ::fdatasync(fd_) != 0) s = Status::Error("fdatasync " + tmp_ + ": " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (s && ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    s = Status::Error("rename to " + path_ + ": " + std::strerror(errno));
  }
  if (!s) {
    ::unlink(tmp_.c_str());
    return s;
  }
  // The rename is durable once the directory is: a shard reported done survives a machine crash.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::Error("open " + dir + ": " + std::strerror(errno));
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return Status::Error("fsync " + dir + ": " + std::strerror(err));
  return total_ + tail.size();
}

ShardReader::ShardReader(ShardReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), meta_(std::move(o.meta_)), crc_(o.crc_) {
  o.fd_ = -1;
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<ShardReader> ShardReader::open(const std::string& path) {
  ShardReader r;
  r.path_ = path;
  r.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.fd_ < 0) return Status::Error("checkpoint shard " + path + ": " + std::strerror(errno));
  struct stat st {};
  ::fstat(r.fd_, &st);
  const std::uint64_t file_size = static_cast<std::uint64_t>(st.st_size);
  unsigned char fixed[kFixed];
  if (file_size < kFixed + 8 || !read_all(r.fd_, fixed, kFixed, path)) {
    return Status::Error("checkpoint shard " + path + ": too short to be a shard");
  }
  if (std::memcmp(fixed, kMagic, 8) != 0) {
    return Status::Error("checkpoint shard " + path + ": bad magic (not a shard)");
  }
  const unsigned char* p = fixed + 8;
  const auto version = get<std::uint32_t>(p);
  const auto nallocs = get<std::uint32_t>(p);
  const auto nstates = get<std::uint32_t>(p);
  get<std::uint32_t>(p);
  if (version != kVersion) {
    return Status::Error("checkpoint shard " + path + ": version " + std::to_string(version));
  }
  if (nallocs > kMaxEntries || nstates > kMaxEntries) {
    return Status::Error("checkpoint shard " + path + ": corrupt (entry counts out of range)");
  }
  ShardMeta& m = r.meta_;
  m.job = get<std::int64_t>(p);
  m.epoch = get<std::int64_t>(p);
  m.step = get<std::int64_t>(p);
  m.rank = get<std::int32_t>(p);
  m.world = get<std::int32_t>(p);
  m.next_offset = get<std::uint64_t>(p);
  m.alloc_seq = get<std::uint64_t>(p);
  const std::uint64_t table = nallocs * 24ull + nstates * 8ull;
  if (kFixed + table + 8 > file_size) {
    return Status::Error("checkpoint shard " + path + ": corrupt (table beyond the file)");
  }
  std::vector<unsigned char> t(table);
  if (!read_all(r.fd_, t.data(), table, path)) return Status::Error(path + ": truncated");
  const unsigned char* q = t.data();
  std::uint64_t payload = 0;
  for (std::uint32_t i = 0; i < nallocs; ++i) {
    ShardAlloc a;
    a.addr = get<std::uint64_t>(q);
    a.size = get<std::uint64_t>(q);
    a.seq = get<std::uint64_t>(q);
    payload += a.size;
    if (a.size > file_size) return Status::Error("checkpoint shard " + path + ": corrupt sizes");
    m.allocs.push_back(a);
  }
  for (std::uint32_t i = 0; i < nstates; ++i) {
    m.state_lens.push_back(get<std::uint64_t>(q));
    if (m.state_lens.back() > file_size) {
      return Status::Error("checkpoint shard " + path + ": corrupt sizes");
    }
    payload += m.state_lens.back();
  }
  if (kFixed + table + payload + 8 != file_size) {
    return Status::Error("checkpoint shard " + path + ": corrupt (sizes add up to " +
                         std::to_string(kFixed + table + payload + 8) + " bytes, the file has " +
                         std::to_string(file_size) + ")");
  }
  r.crc_ = crc32c_fast_extend(0, fixed, kFixed);
  r.crc_ = crc32c_fast_extend(r.crc_, t.data(), t.size());
  return r;
}

Status ShardReader::read_next(void* dst, std::uint64_t n) {
  auto* c = static_cast<char*>(dst);
  for (std::uint64_t off = 0; off < n; off += kChunk) {
    const std::uint64_t k = std::min(kChunk, n - off);
    if (auto s = read_all(fd_, c + off, k, path_); !s) return s;
    crc_ = crc32c_fast_extend(crc_, c + off, k);
  }
  return Status::Ok();
}

Status ShardReader::finish() {
  unsigned char tail[8];
  if (auto s = read_all(fd_, tail, 8, path_); !s) return s;
  std::uint32_t stored;
  std::memcpy(&stored, tail, 4);
  if (std::memcmp(tail + 4, kEnd, 4) != 0) {
    return Status::Error("checkpoint shard " + path_ + ": corrupt (no end marker)");
  }
  if (stored != crc_) {
    char b[96];
    std::snprintf(b, sizeof b, " (stored 0x%08x, computed 0x%08x)", stored, crc_);
    return Status::Error("checkpoint shard " + path_ + ": checksum mismatch" + std::string(b));
  }
  return Status::Ok();
}

}  // namespace orrery::runtime
