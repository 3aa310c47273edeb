// The cluster's checkpoint store, in DATA/checkpoints: node agents upload every rank's shard after
// a checkpoint and download shards before a restore (streamed over Cap'n Proto by rpc/), so a job
// can resume on any node, including after the node that took the checkpoint is lost.
//
//   DATA/checkpoints/job-<J>/step-<S>/rank-<R>.ckpt   the shard's bytes
//
// An upload is written to a temporary file and renamed into place only when its size and CRC-32C
// match what the uploader announced, so a shard in the store is always whole. A step is complete
// when every rank 0..W-1 has its shard.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace orrery::service {

class ShardUpload {
 public:
  ~ShardUpload();  // an unfinished upload is discarded
  Status write(std::string_view chunk);
  // Checks size and checksum, then makes the shard visible.
  Status finish();

 private:
  friend class CheckpointStore;
  ShardUpload() = default;
  std::FILE* f_ = nullptr;
  std::string tmp_, final_;
  std::uint64_t expect_size_ = 0, size_ = 0;
  std::uint32_t expect_crc_ = 0, crc_ = 0;
  bool failed_ = false;
};

class ShardDownload {
 public:
  ~ShardDownload();
  // The next chunk (at most `max` bytes); empty at the end.
  Result<std::string> read(std::size_t max);
  std::uint64_t size() const { return size_; }
  std::uint32_t crc() const { return crc_; }  // of the bytes read so far

 private:
  friend class CheckpointStore;
  ShardDownload() = default;
  std::FILE* f_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint32_t crc_ = 0;
};

class CheckpointStore {
 public:
  // Creates `dir` if needed.
  static Result<std::unique_ptr<CheckpointStore>> open(const std::string& dir);

  // At most 4 GiB per shard.
  Result<std::unique_ptr<ShardUpload>> begin_upload(int job, std::int64_t step, int rank,
                                                    std::uint64_t size, std::uint32_t crc);
  Result<std::unique_ptr<ShardDownload>> open_download(int job, std::int64_t step, int rank) const;
  bool has(int job, std::int64_t step, int rank) const;
  bool complete(int job, std::int64_t step, int world) const;
  // The latest step >= `from` whose cut is complete for `world` ranks, or -1 (lists the job's
  // folder: for recovery, not for every report).
  std::int64_t latest_complete(int job, std::int64_t from, int world) const;
  std::string shard_path(int job, std::int64_t step, int rank) const;

 private:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace orrery::service
