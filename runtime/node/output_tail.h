// Follows the log files of this node's workers (their stdout and stderr, merged as the process
// wrote them: <data_dir>/logs/job-J-epoch-E-rank-R.log) and hands out what was appended since the
// last look, so the agent can ship it to the core (docs/runtime.md, "Workers' output").
//
// No transport, no threads, no clock: the node runtime owns one, adds a file per rank it spawns,
// finishes an incarnation when its run ends, and the agent takes the new bytes from its pump.
// Reading is by offset (pread) on a descriptor kept open from the first successful open, so a file
// renamed or removed under it is still read to its end.
//
// Fairness: take(max) shares `max` among the files with new bytes (round-robin passes, oldest file
// first in each), so one chatty rank cannot hold back the others' output, and returns one chunk per
// file, oldest file first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/node/job_runner.h"

namespace orrery::runtime {

class OutputTail {
 public:
  OutputTail() = default;
  ~OutputTail();
  OutputTail(const OutputTail&) = delete;
  OutputTail& operator=(const OutputTail&) = delete;

  // Follows `path` as the output of (job, epoch, rank), from its first byte (a worker's log file is
  // new per incarnation). The file need not exist yet. Adding a followed (job, epoch, rank) again
  // changes nothing.
  void add(int job, std::int64_t epoch, int rank, std::string path);
  // The incarnation ended: its files are dropped once read to their end (a file that never
  // appeared is dropped at the next take).
  void finish(int job, std::int64_t epoch);
  // New bytes of every followed file, at most `max_bytes` in all (0: none), fair across files,
  // oldest file first; one chunk per file with new bytes.
  std::vector<OutputChunk> take(std::size_t max_bytes);

  // Files followed now (ended ones not yet read to their end included).
  std::size_t files() const { return files_.size(); }

 private:
  struct File {
    int job = -1;
    std::int64_t epoch = 0;
    int rank = 0;
    std::string path;
    int fd = -1;              // open for reading once the file exists
    std::uint64_t offset = 0;  // bytes handed out so far
    bool finished = false;    // the incarnation ended: drop at end of file
    bool at_end = false;      // the last read found no more bytes
  };
  // Reads up to `n` bytes of `f` into `out`; marks at_end when the file has no more.
  static void read_some(File& f, std::size_t n, std::string& out);

  std::vector<File> files_;  // in the order added: oldest first
};

}  // namespace orrery::runtime
