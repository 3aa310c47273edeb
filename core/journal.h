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
//
// A crash only damages the end of the file, so a bad record with a valid record after it is
// damage in the middle (a disk or a copy gone wrong), not a torn tail: reading and opening fail
// with an error naming both offsets, and the file is left untouched. After a bad record at offset
// B the scanner tries every start offset B+1 .. B+1 MiB, and B+8+length when the bad record's
// length is in range (a damaged payload of up to 16 MiB), for a record with a length <= 16 MiB, its
// whole payload before the end of the file, and a matching CRC. Nothing valid there: a torn tail.
// That look-ahead runs only once a bad record is found, so clean journals cost nothing extra; it
// reads at most about 33 MiB past B and hashes it once. Damage wiping out more than 1 MiB of
// records that ends in more records is not told apart from a torn tail. A random 8 bytes pass as a
// record with probability 2^-32 per offset tried.
//
// Messages number records from 1 in file order: record 1 is the first after the header (the fleet
// record in orrery-core journals), as in orrery-check's "journal record N".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

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
inline constexpr std::string_view kJournalMagic = "ORRJRNL1";  // the file header

class JournalWriter {
 public:
  // Opens (creating if absent) the journal at `path` for appending. An existing journal is read
  // first: a bad header or damage in the middle is an error and the file is left as it was; a
  // torn/corrupt tail is truncated away (what was cut is in recovered_tail_error()).
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
  std::string tail_error;        // e.g. "<path>: checksum mismatch in record 12 at offset 4096
                                 // (stored 0x..., computed 0x...)", records numbered from 1
};

// Reads every good record. Errors when the file cannot be read, its header is wrong, or it is
// damaged in the middle (a bad record followed by a valid one, see above: "<path>: corrupt record
// 2 at offset 199 (checksum mismatch: ...) followed by a valid record at offset 356: the journal is
// damaged in the middle, not torn at the end; refusing to recover"). A torn tail is reported in the
// result, not as an error.
Result<JournalContents> read_journal(const std::string& path);

// Receives one record's payload (valid only during the call); returns false to stop reading.
using RecordSink = std::function<bool(std::string_view payload)>;

// The streaming read path, for journals too large to hold in memory (orrery-check replay): hands
// every good record to `on_record`, in file order, with exactly read_journal's checks, keeping
// only one read chunk (1 MiB, or one record when larger) in memory whatever the journal's size.
// The result is read_journal's with `records` empty; when `on_record` stops the read early,
// good_bytes ends after the last record it saw. One difference: damage in the middle is found only
// when the scan reaches it, so the records before the bad one have been handed over already when
// that error is returned.
Result<JournalContents> stream_journal(const std::string& path, const RecordSink& on_record);

// The checksum stored with a record of this payload.
std::uint32_t record_crc(std::string_view payload);

}  // namespace orrery::core
