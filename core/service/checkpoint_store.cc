#include "core/service/checkpoint_store.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "base/crc32c.h"

namespace orrery::service {

namespace fs = std::filesystem;

namespace {
constexpr std::uint64_t kMaxShard = std::uint64_t{4} << 30;
std::string errno_text() { return std::strerror(errno); }
}  // namespace

ShardUpload::~ShardUpload() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

Status ShardUpload::write(std::string_view chunk) {
  if (!f_ || failed_) return Status::Error("upload already finished or failed");
  if (size_ + chunk.size() > expect_size_) {
    failed_ = true;
    return Status::Error("shard upload longer than the announced " + std::to_string(expect_size_) +
                         " bytes");
  }
  if (!chunk.empty() && std::fwrite(chunk.data(), 1, chunk.size(), f_) != chunk.size()) {
    failed_ = true;
    return Status::Error("writing " + tmp_ + ": " + errno_text());
  }
  size_ += chunk.size();
  crc_ = crc32c_extend(crc_, chunk);
  return Status::Ok();
}

Status ShardUpload::finish() {
  if (!f_ || failed_) return Status::Error("upload already finished or failed");
  if (size_ != expect_size_)
    return Status::Error("shard upload ended after " + std::to_string(size_) + " of " +
                         std::to_string(expect_size_) + " bytes");
  if (crc_ != expect_crc_)
    return Status::Error("shard checksum mismatch: announced " + std::to_string(expect_crc_) +
                         ", received bytes give " + std::to_string(crc_));
  bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok) return Status::Error("syncing " + tmp_ + ": " + errno_text());
  std::error_code ec;
  fs::rename(tmp_, final_, ec);
  if (ec) return Status::Error("renaming " + tmp_ + ": " + ec.message());
  return Status::Ok();
}

ShardDownload::~ShardDownload() {
  if (f_) std::fclose(f_);
}

Result<std::string> ShardDownload::read(std::size_t max) {
  std::string buf(max, '\0');
  std::size_t n = std::fread(buf.data(), 1, max, f_);
  if (n < max && std::ferror(f_)) return Status::Error("reading shard: " + errno_text());
  buf.resize(n);
  crc_ = crc32c_extend(crc_, buf);
  return buf;
}

Result<std::unique_ptr<CheckpointStore>> CheckpointStore::open(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create checkpoint store " + dir + ": " + ec.message());
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(dir));
}

std::string CheckpointStore::shard_path(int job, std::int64_t step, int rank) const {
  return dir_ + "/job-" + std::to_string(job) + "/step-" + std::to_string(step) + "/rank-" +
         std::to_string(rank) + ".ckpt";
}

Result<std::unique_ptr<ShardUpload>> CheckpointStore::begin_upload(int job, std::int64_t step,
                                                                   int rank, std::uint64_t size,
                                                                   std::uint32_t crc) {
  if (job < 0 || step < 0 || rank < 0)
    return Status::Error("shard coordinates must be non-negative (job " + std::to_string(job) +
                         ", step " + std::to_string(step) + ", rank " + std::to_string(rank) + ")");
  if (size > kMaxShard) return Status::Error("shard of " + std::to_string(size) + " bytes exceeds 4 GiB");
  std::string path = shard_path(job, step, rank);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::Error("cannot create " + fs::path(path).parent_path().string() + ": " + ec.message());
  std::unique_ptr<ShardUpload> up(new ShardUpload());
  static std::uint64_t counter = 0;  // unique temporary names within this process
  up->tmp_ = path + ".tmp" + std::to_string(++counter);
  up->final_ = path;
  up->expect_size_ = size;
  up->expect_crc_ = crc;
  up->f_ = std::fopen(up->tmp_.c_str(), "wb");
  if (!up->f_) return Status::Error("cannot create " + up->tmp_ + ": " + errno_text());
  return up;
}

Result<std::unique_ptr<ShardDownload>> CheckpointStore::open_download(int job, std::int64_t step,
                                                                      int rank) const {
  std::string path = shard_path(job, step, rank);
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec)
    return Status::Error("no shard for job " + std::to_string(job) + " step " +
                         std::to_string(step) + " rank " + std::to_string(rank) + " in the store");
  std::unique_ptr<ShardDownload> d(new ShardDownload());
  d->f_ = std::fopen(path.c_str(), "rb");
  if (!d->f_) return Status::Error("cannot open " + path + ": " + errno_text());
  d->size_ = size;
  return d;
}

bool CheckpointStore::has(int job, std::int64_t step, int rank) const {
  std::error_code ec;
  return fs::exists(shard_path(job, step, rank), ec);
}

bool CheckpointStore::complete(int job, std::int64_t step, int world) const {
  if (world <= 0) return false;
  for (int r = 0; r < world; ++r)
    if (!has(job, step, r)) return false;
  return true;
}

std::int64_t CheckpointStore::latest_complete(int job, std::int64_t from, int world) const {
  std::int64_t best = -1;
  std::error_code ec;
  for (fs::directory_iterator it(dir_ + "/job-" + std::to_string(job), ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    std::int64_t step = -1;
    const auto digits = name.substr(5);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    step = std::stoll(digits);
    if (step >= from && step > best && complete(job, step, world)) best = step;
  }
  return best;
}

}  // namespace orrery::service
