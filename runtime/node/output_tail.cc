#include "runtime/node/output_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace orrery::runtime {

OutputTail::~OutputTail() {
  for (auto& f : files_)
    if (f.fd >= 0) ::close(f.fd);
}

void OutputTail::add(int job, std::int64_t epoch, int rank, std::string path) {
  for (const auto& f : files_)
    if (f.job == job && f.epoch == epoch && f.rank == rank) return;
  File f;
  f.job = job;
  f.epoch = epoch;
  f.rank = rank;
  f.path = std::move(path);
  files_.push_back(std::move(f));
}

void OutputTail::finish(int job, std::int64_t epoch) {
  for (auto& f : files_)
    if (f.job == job && f.epoch == epoch) f.finished = true;
}

void OutputTail::read_some(File& f, std::size_t n, std::string& out) {
  if (f.fd < 0) {
    // O_CLOEXEC: the runtime forks workers, which must not inherit their neighbours' logs.
    f.fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) {
      f.at_end = true;  // not written yet (or never will be, once finished)
      return;
    }
  }
  // Only what the file holds now: a take with a large budget must not allocate (and zero) that
  // budget for every file on every call.
  struct stat sb {};
  if (::fstat(f.fd, &sb) == 0) {
    const auto size = static_cast<std::uint64_t>(sb.st_size);
    n = std::min<std::uint64_t>(n, size > f.offset ? size - f.offset : 0);
  }
  if (n == 0) {
    f.at_end = true;
    return;
  }
  const std::size_t had = out.size();
  out.resize(had + n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(f.fd, out.data() + had + got, n - got, static_cast<off_t>(f.offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // end of file (or an error: tried again at the next take)
    got += static_cast<std::size_t>(r);
  }
  out.resize(had + got);
  f.offset += got;
  if (got < n) f.at_end = true;
}

std::vector<OutputChunk> OutputTail::take(std::size_t max_bytes) {
  std::vector<std::string> got(files_.size());
  for (auto& f : files_) f.at_end = false;
  std::size_t left = max_bytes;
  // Each pass gives every file that may have more an equal share of what is left. A pass either
  // spends budget or finds files at their end, so the loop ends.
  while (left > 0) {
    const auto open = static_cast<std::size_t>(
        std::count_if(files_.begin(), files_.end(), [](const File& f) { return !f.at_end; }));
    if (open == 0) break;
    const std::size_t share = std::max<std::size_t>(left / open, 1);
    for (std::size_t i = 0; i < files_.size() && left > 0; ++i) {
      if (files_[i].at_end) continue;
      const std::size_t before = got[i].size();
      read_some(files_[i], std::min(share, left), got[i]);
      left -= got[i].size() - before;
    }
  }
  std::vector<OutputChunk> out;
  for (std::size_t i = 0; i < files_.size(); ++i)
    if (!got[i].empty()) out.push_back({files_[i].job, files_[i].epoch, files_[i].rank, std::move(got[i])});
  // An ended incarnation's file read to its end has nothing more to give.
  std::vector<File> keep;
  for (auto& f : files_) {
    if (f.finished && f.at_end) {
      if (f.fd >= 0) ::close(f.fd);
      continue;
    }
    keep.push_back(std::move(f));
  }
  files_ = std::move(keep);
  return out;
}

}  // namespace orrery::runtime
