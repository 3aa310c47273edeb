// Checkpoint shards: one file per rank and checkpoint, <ckpt_dir>/job-J/step-S/rank-R.ckpt,
// holding the rank's allocations (address, size, allocation number, bytes) and its registered
// host state, with a CRC-32C over the whole file. Written to a temporary name, fsync'd and
// renamed (and the directory fsync'd), so a shard that exists is complete and survives a crash. Read back with every size checked against the
// file before anything is allocated, and the checksum checked before the restore is accepted:
// a damaged shard is a clear error naming the file, never a half-restored worker.
//
// Layout (little-endian): "ORYSHRD1", u32 version, u32 nallocs, u32 nstates, u32 0, i64 job,
// i64 epoch, i64 step, i32 rank, i32 world, u64 next_offset, u64 alloc_seq, nallocs x (u64 addr,
// u64 size, u64 seq), nstates x u64 len, the allocations' bytes, the states' bytes, u32 crc32c of
// everything before it, "END!".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/result.h"

namespace orrery::runtime {

struct ShardAlloc {
  std::uint64_t addr = 0, size = 0, seq = 0;
};

struct ShardMeta {
  std::int64_t job = 0, epoch = 0, step = 0;
  std::int32_t rank = 0, world = 0;
  std::uint64_t next_offset = 0, alloc_seq = 0;
  std::vector<ShardAlloc> allocs;
  std::vector<std::uint64_t> state_lens;
};

std::string shard_file(const std::string& ckpt_dir, std::int64_t job, std::int64_t step, int rank);

// Writes a shard as a stream: open() writes the header, then append() the allocations' bytes in
// table order followed by the states' bytes (exactly the sizes the meta announces), then
// finish() writes the checksum, fsyncs and renames the file into place, then fsyncs the
// directory. Destroyed before finish(), it removes the temporary file: a shard that exists is
// always complete.
class ShardWriter {
 public:
  static Result<ShardWriter> open(const std::string& path, const ShardMeta& meta);
  ShardWriter(ShardWriter&& o) noexcept;
  ShardWriter& operator=(ShardWriter&&) = delete;
  ~ShardWriter();
  Status append(const void* p, std::uint64_t n);
  // Returns the bytes written.
  Result<std::uint64_t> finish();

 private:
  ShardWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  std::uint32_t crc_ = 0;
  std::uint64_t total_ = 0, expected_ = 0;
};

class ShardReader {
 public:
  static Result<ShardReader> open(const std::string& path);
  ShardReader(ShardReader&& o) noexcept;
  ShardReader& operator=(ShardReader&&) = delete;
  ~ShardReader();
  const ShardMeta& meta() const { return meta_; }
  // In file order: every allocation, then every state, then finish().
  Status read_next(void* dst, std::uint64_t n);
  // Checks the checksum and the end marker.
  Status finish();

 private:
  ShardReader() = default;
  std::string path_;
  int fd_ = -1;
  ShardMeta meta_;
  std::uint32_t crc_ = 0;
};

}  // namespace orrery::runtime
