// The append-only decision journal. Every committed decision is one record; the core's state is
// rebuilt by replaying the records in order. On disk:
//
//   file   := header record*
//   header := "ORRJRNL1"                       (8 bytes, magic and format version)
//   record := length:u32le crc:u32le payload   (length <= 16 MiB)
//   crc    := CRC-32C of the four length bytes followed by the payload. Covering the length too
//             means a zero-filled tail (length 0, crc 0) is not mistaken for empty records.
//
// Appends are buffered and written in groups (group commit): the group is written with one
// write() and made durable per the fsync policy. A crash can leave a torn or corrupt tail; reading
// detects it (short header, short payload, length out of range, checksum mismatch), reports the
// byte offset and the reason, and returns every record before it. Opening a journal for append
// truncates such a tail so new records follow the last good one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace orrery::core {

enum class FsyncPolicy {
  kAlways,  // write and fdatasync every record before append() returns
  kGroup,   // write + fdatasync once per group of `group_records` records, and on flush()
  kNever,   // write per group; durability left to the OS (tests, benchmarks, simulation)
};

struct JournalOptions {
  FsyncPolicy fsync = FsyncPolicy::kGroup;
  std::size_t group_records = 256;  // records buffered before a group is written (>= 1)
};

inline constexpr std::uint32_t kMaxJournalRecord = 16u << 20;

class JournalWriter {
 public:
  // Opens (creating if absent) the journal at `path` for appending. An existing journal is read
  // first: a bad header is an error; a torn/corrupt tail is truncated away (what was cut is in
  // recovered_tail_error()).
  static Result<std::unique_ptr<JournalWriter>> open(const std::string& path,
                                                     JournalOptions options = {});
  ~JournalWriter();  // flushes; errors there are lost, call flush() to see them

  // Buffers one record; writes (and syncs, per policy) when the group is full.
  Status append(std::string_view payload);
  // Writes every buffered record and syncs unless the policy is kNever.
  Status flush();

  std::uint64_t records() const;        // records in the journal, buffered ones included
  std::uint64_t durable_records() const;  // records written (and synced per policy)
  const std::string& recovered_tail_error() const;  // empty when the journal was clean

 private:
  JournalWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct JournalContents {
  std::vector<std::string> records;
  std::uint64_t good_bytes = 0;  // offset just past the last good record
  bool clean = true;             // false when a torn or corrupt tail was found
  std::string tail_error;        // e.g. "checksum mismatch in record 12 at offset 4096"
};

// Reads every good record. Errors only when the file cannot be read or its header is wrong; a bad
// tail is reported in the result, not as an error.
Result<JournalContents> read_journal(const std::string& path);

// CRC-32C (Castagnoli) of data.
std::uint32_t crc32c(std::string_view data);
// The CRC-32C of (what gave `crc`) followed by data: crc32c(a + b) == crc32c_extend(crc32c(a), b).
std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view data);
// The checksum stored with a record of this payload.
std::uint32_t record_crc(std::string_view payload);

}  // namespace orrery::core
