#include "core/service/output_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace orrery::service {

namespace {

// Size of a file, 0 when it does not exist.
std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

OutputStore::OutputStore(std::string dir, OutputLimits limits) : dir_(std::move(dir)), limits_(limits) {}

std::string OutputStore::path(int job, int rank, const char* suffix) const {
  return dir_ + "/job-" + std::to_string(job) + "/rank-" + std::to_string(rank) + suffix;
}

OutputStore::Rank& OutputStore::rank(int job, int rank_id) {
  Rank& r = ranks_[{job, rank_id}];
  if (!r.loaded) load(job, rank_id, r);
  return r;
}

// What a restarted core finds on disk. The header state is not kept: the next incarnation's bytes
// (or the same one's, after the restart) come behind a header again.
void OutputStore::load(int job, int rank_id, Rank& r) {
  r.loaded = true;
  if (dir_.empty()) return;
  r.cur = file_size(path(job, rank_id, ".log"));
  r.prev = file_size(path(job, rank_id, ".log.1"));
  r.start = r.prev;  // no .start file: nothing dropped before .log.1
  std::ifstream in(path(job, rank_id, ".start"));
  std::string text;
  if (in >> text) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && p == text.data() + text.size() && v >= r.prev) r.start = v;
  }
  if (r.cur > 0) {
    std::string last;
    if (read_file(path(job, rank_id, ".log"), r.cur - 1, 1, last) && last.size() == 1)
      r.line_start = last[0] == '\n';
  }
}

Status OutputStore::append(int job, int rank_id, std::int64_t epoch, std::string_view node,
                           std::string_view data) {
  if (job < 0 || rank_id < 0) return Status::InvalidArgument("output of job " + std::to_string(job) + " rank " + std::to_string(rank_id));
  if (data.empty()) return Status::Ok();
  Rank& r = rank(job, rank_id);
  std::string bytes;
  const bool header = epoch != r.epoch || node != r.node;
  if (header) {
    if (!r.line_start) bytes += '\n';
    bytes += "--- epoch " + std::to_string(epoch) + " on node " + std::string(node) + " ---\n";
  }
  bytes += data;
  if (dir_.empty()) {
    append_memory(r, bytes);
  } else if (auto st = append_file(job, rank_id, r, bytes); !st) {
    return st;
  }
  r.epoch = epoch;
  r.node = std::string(node);
  r.line_start = bytes.back() == '\n';
  return Status::Ok();
}

Status OutputStore::append_file(int job, int rank_id, Rank& r, const std::string& bytes) {
  const std::uint64_t segment = std::max<std::uint64_t>(limits_.rank_bytes / 2, 1);
  if (r.cur > 0 && r.cur + bytes.size() > segment)
    if (auto st = close_segment(job, rank_id, r); !st) return st;
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/job-" + std::to_string(job), ec);
  const std::string p = path(job, rank_id, ".log");
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot open " + p + ": " + errno_text());
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::string why = errno_text();
      // A partial append is undone, so the file stays the stream the offsets describe.
      (void)::ftruncate(fd, static_cast<off_t>(r.cur));
      ::close(fd);
      return Status::Internal("cannot append to " + p + ": " + why);
    }
    done += static_cast<std::size_t>(w);
  }
  ::close(fd);
  r.cur += bytes.size();
  return Status::Ok();
}

// The newest segment becomes the one before it (the older one is dropped). The new start offset
// is written first: a crash between the two steps then repeats bytes rather than misplacing them.
Status OutputStore::close_segment(int job, int rank_id, Rank& r) {
  const std::uint64_t next = r.start + r.cur;
  const std::string start = path(job, rank_id, ".start");
  {
    std::ofstream out(start + ".tmp", std::ios::trunc);
    out << next << "\n";
    if (!out.flush()) return Status::Internal("cannot write " + start + ".tmp");
  }
  if (std::rename((start + ".tmp").c_str(), start.c_str()) != 0)
    return Status::Internal("cannot rename " + start + ".tmp: " + errno_text());
  const std::string log = path(job, rank_id, ".log");
  if (std::rename(log.c_str(), (log + ".1").c_str()) != 0)
    return Status::Internal("cannot rename " + log + ": " + errno_text());
  r.prev = r.cur;
  r.cur = 0;
  r.start = next;
  return Status::Ok();
}

void OutputStore::append_memory(Rank& r, const std::string& bytes) {
  r.last_write = ++writes_;
  r.mem += bytes;
  memory_bytes_ += bytes.size();
  // Drop the oldest bytes down to three quarters of the limit, so trimming is not done per append.
  if (r.mem.size() > limits_.memory_rank_bytes) {
    const std::size_t keep = static_cast<std::size_t>(limits_.memory_rank_bytes * 3 / 4);
    const std::size_t drop = r.mem.size() - keep;
    r.mem.erase(0, drop);
    r.start += drop;
    memory_bytes_ -= drop;
  }
  while (memory_bytes_ > limits_.memory_total_bytes) {
    Rank* oldest = nullptr;
    for (auto& [k, other] : ranks_)
      if (!other.mem.empty() && (!oldest || other.last_write < oldest->last_write)) oldest = &other;
    if (!oldest) break;
    oldest->start += oldest->mem.size();
    memory_bytes_ -= oldest->mem.size();
    oldest->mem.clear();
    oldest->mem.shrink_to_fit();
  }
}

Status OutputStore::read_file(const std::string& path, std::uint64_t at, std::size_t n, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + path + ": " + errno_text());
  const std::size_t had = out.size();
  out.resize(had + n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + had + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  out.resize(had + got);
  return Status::Ok();
}

Result<WorkerOutput> OutputStore::read(int job, int rank_id, std::uint64_t offset, std::uint32_t max_bytes) {
  if (job < 0 || rank_id < 0) return Status::InvalidArgument("output of job " + std::to_string(job) + " rank " + std::to_string(rank_id));
  WorkerOutput out;
  // Nothing written: no record is made of every rank ever asked about.
  if (!ranks_.count({job, rank_id}) &&
      (dir_.empty() || (!std::filesystem::exists(path(job, rank_id, ".log")) &&
                        !std::filesystem::exists(path(job, rank_id, ".log.1")))))
    return out;
  Rank& r = rank(job, rank_id);
  const std::uint64_t kept = dir_.empty() ? r.mem.size() : r.cur;
  const std::uint64_t first = dir_.empty() ? r.start : r.start - r.prev;
  out.size = r.start + kept;
  offset = std::clamp(offset, first, out.size);
  const auto n = static_cast<std::size_t>(
      std::min<std::uint64_t>({out.size - offset, max_bytes, kOutputReadMax}));
  if (dir_.empty()) {
    out.data = r.mem.substr(static_cast<std::size_t>(offset - r.start), n);
  } else {
    if (offset < r.start) {
      const auto from_prev = static_cast<std::size_t>(std::min<std::uint64_t>(n, r.start - offset));
      if (auto st = read_file(path(job, rank_id, ".log.1"), offset - first, from_prev, out.data); !st) return st;
    }
    if (out.data.size() < n && offset + out.data.size() >= r.start) {
      const std::uint64_t at = offset + out.data.size() - r.start;
      if (auto st = read_file(path(job, rank_id, ".log"), at, n - out.data.size(), out.data); !st) return st;
    }
  }
  out.next_offset = offset + out.data.size();
  return out;
}

}  // namespace orrery::service
