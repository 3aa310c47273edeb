// The workers' output as the core keeps it (docs/runtime.md, "Workers' output"): per (job, rank)
// one byte stream, appended as the nodes ship chunks of it and read by offset, so a client can
// show the last lines and follow what comes. The stream is the rank's whole life: every
// incarnation (restart, migration, resize) appends to it behind a line
// "--- epoch E on node N ---", and it outlives the nodes that wrote it.
//
// On disk (`dir` given: DATA/output), files, so it survives a restart of the core:
//   job-J/rank-R.log     the newest segment (what a user reads with tail -f)
//   job-J/rank-R.log.1   the segment before it
//   job-J/rank-R.start   the stream offset of rank-R.log's first byte (absent: no segment dropped)
// A segment is closed at segment_bytes (half the rank's limit): it becomes .log.1, replacing the
// one before, so a rank keeps about half to all of its limit — the newest output — and offsets
// stay those of the whole stream. Closing is two renames, never a copy: an append never blocks the
// core for long. Nothing is fsynced: output is not state, a crash of the machine may lose its tail
// (and a crash in the middle of closing a segment may show its bytes twice).
//
// In memory (`dir` empty: the in-process service of tests): each rank keeps its newest
// memory_rank_bytes, and all ranks together at most memory_total_bytes (the rank written least
// recently loses its kept bytes first).
//
// Single-threaded, like the service.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::service {

// The most one chunk of output from a node may hold, and the most one read returns.
inline constexpr std::size_t kOutputChunkMax = 1 << 20;
inline constexpr std::uint32_t kOutputReadMax = 1 << 20;

struct OutputLimits {
  std::uint64_t rank_bytes = 64ull << 20;         // on disk, per rank: the newest 32-64 MiB kept
  std::uint64_t memory_rank_bytes = 1ull << 20;   // in memory, per rank
  std::uint64_t memory_total_bytes = 64ull << 20;  // in memory, all ranks
};

class OutputStore {
 public:
  explicit OutputStore(std::string dir, OutputLimits limits = {});

  // Appends `data` to the output of (job, rank), written by incarnation `epoch` on `node`; the
  // first bytes of an incarnation (or after a restart of the core) come behind its header line.
  // A failed write (disk full) is kInternal and leaves the stream as it was.
  Status append(int job, int rank, std::int64_t epoch, std::string_view node, std::string_view data);
  // The bytes of (job, rank)'s stream from `offset` on, at most min(max_bytes, kOutputReadMax).
  // An offset past the end reads nothing at the end; one before the oldest byte kept reads from
  // that byte (data starts at next_offset - data.size()). A rank that wrote nothing has size 0.
  // job_ended is left false (the service knows).
  Result<WorkerOutput> read(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes);

 private:
  struct Rank {
    bool loaded = false;
    std::uint64_t start = 0;  // stream offset of the newest segment's (or the memory's) first byte
    std::uint64_t cur = 0;    // bytes of the newest segment (on disk)
    std::uint64_t prev = 0;   // bytes of the segment before it (on disk)
    std::string mem;          // in memory: the kept bytes, from `start`
    std::int64_t epoch = -1;  // the incarnation whose header was written last
    std::string node;
    bool line_start = true;   // the stream ends with a line break (or is empty)
    std::uint64_t last_write = 0;  // in memory: for eviction
  };
  std::string path(int job, int rank, const char* suffix) const;
  Rank& rank(int job, int rank);
  void load(int job, int rank_id, Rank& r);
  Status append_file(int job, int rank_id, Rank& r, const std::string& bytes);
  Status close_segment(int job, int rank_id, Rank& r);
  void append_memory(Rank& r, const std::string& bytes);
  static Status read_file(const std::string& path, std::uint64_t at, std::size_t n, std::string& out);

  std::string dir_;
  OutputLimits limits_;
  std::map<std::pair<int, int>, Rank> ranks_;
  std::uint64_t memory_bytes_ = 0;
  std::uint64_t writes_ = 0;
};

}  // namespace orrery::service
