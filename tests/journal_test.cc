// Unit tests of the decision journal (core/journal.h): framing, group commit, fsync policies,
// detection and recovery of torn or corrupt tails, and refusal of journals damaged in the middle.
#include "core/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "tests/temp_dir.h"

namespace orrery::core {
namespace {

namespace fs = std::filesystem;

class JournalTest : public ::testing::Test {
 protected:

  std::unique_ptr<JournalWriter> open_ok(JournalOptions o = {}) {
    auto w = JournalWriter::open(path_, o);
    EXPECT_TRUE(w.ok()) << w.reason();
    return w.ok() ? std::move(w).value() : nullptr;
  }

  JournalContents read_ok() {
    auto c = read_journal(path_);
    EXPECT_TRUE(c.ok()) << c.reason();
    return c.ok() ? std::move(c).value() : JournalContents{};
  }

  // Writes `records` with kNever and returns the file offset at which each record starts.
  std::vector<std::uint64_t> write_records(const std::vector<std::string>& records) {
    auto w = open_ok({FsyncPolicy::kNever, 3});
    std::vector<std::uint64_t> offsets;
    std::uint64_t off = 8;
    for (const auto& r : records) {
      EXPECT_TRUE(w->append(r).ok());
      offsets.push_back(off);
      off += 8 + r.size();
    }
    EXPECT_TRUE(w->flush().ok());
    return offsets;
  }

  std::string file_bytes() const { return orrery::testing::read_bytes(path_); }
  void set_file_bytes(const std::string& bytes) const {
    orrery::testing::write_bytes(path_, bytes);
  }
  std::uint64_t file_size() const { return fs::file_size(path_); }

  orrery::testing::TempDir tmp_{"orrery_journal_test"};
  const std::string& dir_ = tmp_.path();
  std::string path_ = tmp_.file("decisions.jrnl");
};

// Deterministic payloads of varied sizes, binary content included; record 0 is empty.
std::vector<std::string> sample_records(int n) {
  std::vector<std::string> out;
  std::uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    std::size_t len;
    if (i == 0 || i % 17 == 0) {
      len = 0;
    } else if (i % 50 == 1) {
      len = 70000 + i;  // larger than typical, spans read chunks when many
    } else {
      len = static_cast<std::size_t>((i * 37) % 300);
    }
    std::string s(len, '\0');
    for (auto& c : s) {
      x = x * 1103515245u + 12345u;
      c = static_cast<char>(x >> 24);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Bit-at-a-time CRC-32C, the definition the table-driven code must match.
std::uint32_t crc32c_reference(std::string_view data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string inc(32, '\0'), dec(32, '\0');
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesBitwiseAtEveryLengthAndAlignment) {
  std::string buf(300, '\0');
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131 + 7);
  for (std::size_t start = 0; start < 8; ++start) {
    for (std::size_t len = 0; len + start <= buf.size(); len += 1 + len / 16) {
      std::string_view v(buf.data() + start, len);
      ASSERT_EQ(crc32c(v), crc32c_reference(v)) << "start " << start << " len " << len;
    }
  }
}

TEST_F(JournalTest, RoundTripVariedSizesIncludingEmpty) {
  const auto records = sample_records(400);
  write_records(records);
  auto c = read_ok();
  EXPECT_TRUE(c.clean) << c.tail_error;
  EXPECT_TRUE(c.tail_error.empty());
  EXPECT_EQ(c.records, records);
  EXPECT_EQ(c.good_bytes, file_size());
}

TEST_F(JournalTest, NewJournalHasOnlyHeader) {
  {
    auto w = open_ok();
    EXPECT_EQ(w->records(), 0u);
    EXPECT_TRUE(w->recovered_tail_error().empty());
  }
  EXPECT_EQ(file_bytes(), "ORRJRNL1");
  auto c = read_ok();
  EXPECT_TRUE(c.clean);
  EXPECT_TRUE(c.records.empty());
  EXPECT_EQ(c.good_bytes, 8u);
}

TEST_F(JournalTest, ReopenAndAppendContinues) {
  const auto records = sample_records(60);
  {
    auto w = open_ok({FsyncPolicy::kGroup, 8});
    for (int i = 0; i < 25; ++i) ASSERT_TRUE(w->append(records[i]).ok());
  }  // destructor flushes the partial group
  {
    auto w = open_ok({FsyncPolicy::kGroup, 8});
    EXPECT_EQ(w->records(), 25u);
    EXPECT_EQ(w->durable_records(), 25u);
    EXPECT_TRUE(w->recovered_tail_error().empty());
    for (int i = 25; i < 60; ++i) ASSERT_TRUE(w->append(records[i]).ok());
    ASSERT_TRUE(w->flush().ok());
    EXPECT_EQ(w->records(), 60u);
  }
  auto c = read_ok();
  EXPECT_TRUE(c.clean) << c.tail_error;
  EXPECT_EQ(c.records, records);
}

TEST_F(JournalTest, AlwaysPolicyWritesEveryRecordBeforeAppendReturns) {
  auto w = open_ok({FsyncPolicy::kAlways, 100});  // group size is irrelevant for kAlways
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(w->append("rec" + std::to_string(i)).ok());
    EXPECT_EQ(w->records(), static_cast<std::uint64_t>(i));
    EXPECT_EQ(w->durable_records(), static_cast<std::uint64_t>(i));
    EXPECT_EQ(read_ok().records.size(), static_cast<std::size_t>(i));
  }
}

TEST_F(JournalTest, GroupPolicyWritesAtGroupBoundaryAndOnFlush) {
  auto w = open_ok({FsyncPolicy::kGroup, 4});
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(w->append("g" + std::to_string(i)).ok());
    EXPECT_EQ(w->records(), static_cast<std::uint64_t>(i));
    EXPECT_EQ(w->durable_records(), 0u);
  }
  EXPECT_EQ(file_size(), 8u);  // nothing written before the group is full
  ASSERT_TRUE(w->append("g4").ok());
  EXPECT_EQ(w->records(), 4u);
  EXPECT_EQ(w->durable_records(), 4u);
  EXPECT_EQ(read_ok().records.size(), 4u);

  for (int i = 5; i <= 10; ++i) ASSERT_TRUE(w->append("g" + std::to_string(i)).ok());
  EXPECT_EQ(w->records(), 10u);
  EXPECT_EQ(w->durable_records(), 8u);  // two full groups
  EXPECT_EQ(read_ok().records.size(), 8u);

  ASSERT_TRUE(w->flush().ok());
  EXPECT_EQ(w->durable_records(), 10u);
  ASSERT_TRUE(w->flush().ok());  // nothing buffered: a no-op
  EXPECT_EQ(w->durable_records(), 10u);
  auto c = read_ok();
  ASSERT_EQ(c.records.size(), 10u);
  EXPECT_EQ(c.records.front(), "g1");
  EXPECT_EQ(c.records.back(), "g10");
}

TEST_F(JournalTest, GroupOfOneWritesEveryRecord) {
  auto w = open_ok({FsyncPolicy::kGroup, 1});
  ASSERT_TRUE(w->append("a").ok());
  EXPECT_EQ(w->durable_records(), 1u);
  ASSERT_TRUE(w->append("b").ok());
  EXPECT_EQ(w->durable_records(), 2u);
}

TEST_F(JournalTest, NeverPolicyWritesPerGroupWithoutSync) {
  auto w = open_ok({FsyncPolicy::kNever, 3});
  ASSERT_TRUE(w->append("n1").ok());
  ASSERT_TRUE(w->append("n2").ok());
  EXPECT_EQ(w->durable_records(), 0u);
  EXPECT_EQ(file_size(), 8u);
  ASSERT_TRUE(w->append("n3").ok());
  EXPECT_EQ(w->durable_records(), 3u);
  EXPECT_EQ(file_size(), 8u + 3 * (8 + 2));
  ASSERT_TRUE(w->append("n4").ok());
  EXPECT_EQ(w->records(), 4u);
  EXPECT_EQ(w->durable_records(), 3u);
  ASSERT_TRUE(w->flush().ok());
  EXPECT_EQ(w->durable_records(), 4u);
  EXPECT_EQ(read_ok().records, (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
}

TEST_F(JournalTest, DestructorFlushesBufferedRecords) {
  {
    auto w = open_ok({FsyncPolicy::kGroup, 1000});
    ASSERT_TRUE(w->append("x").ok());
    ASSERT_TRUE(w->append("").ok());
    EXPECT_EQ(w->durable_records(), 0u);
  }
  EXPECT_EQ(read_ok().records, (std::vector<std::string>{"x", ""}));
}

TEST_F(JournalTest, RejectsOversizedRecordAndKeepsGoing) {
  auto w = open_ok({FsyncPolicy::kNever, 2});
  ASSERT_TRUE(w->append("before").ok());
  const Status s = w->append(std::string(kMaxJournalRecord + 1, 'z'));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("exceeds"), std::string::npos) << s.reason();
  EXPECT_EQ(w->records(), 1u);
  ASSERT_TRUE(w->append(std::string(kMaxJournalRecord, 'm')).ok());  // the limit itself is fine
  ASSERT_TRUE(w->flush().ok());
  auto c = read_ok();
  EXPECT_TRUE(c.clean) << c.tail_error;
  ASSERT_EQ(c.records.size(), 2u);
  EXPECT_EQ(c.records[1].size(), kMaxJournalRecord);
}

TEST_F(JournalTest, ZeroGroupSizeIsAnError) {
  auto w = JournalWriter::open(path_, {FsyncPolicy::kGroup, 0});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.reason().find("group_records"), std::string::npos) << w.reason();
}

TEST_F(JournalTest, OpenErrorsNameThePathAndCause) {
  const std::string missing = dir_ + "/no/such/dir/j.jrnl";
  auto w = JournalWriter::open(missing);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.reason().find(missing), std::string::npos) << w.reason();
  EXPECT_NE(w.reason().find("No such file or directory"), std::string::npos) << w.reason();

  auto r = read_journal(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.reason().find(missing), std::string::npos) << r.reason();
}

TEST_F(JournalTest, SecondWriterIsRefused) {
  auto first = open_ok();
  auto second = JournalWriter::open(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.reason().find("another writer"), std::string::npos) << second.reason();
}

// --- corruption --------------------------------------------------------------------------------

TEST_F(JournalTest, TruncatedFinalPayloadIsDetected) {
  const auto records = sample_records(30);  // record 29 is 273 bytes
  const auto offsets = write_records(records);
  ASSERT_GT(records.back().size(), 10u);
  ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(file_size() - 10)), 0);
  auto c = read_ok();
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records.size(), 29u);
  EXPECT_EQ(c.good_bytes, offsets.back());
  EXPECT_NE(c.tail_error.find("truncated payload in record 30 at offset " +
                              std::to_string(offsets.back())),
            std::string::npos)
      << c.tail_error;
  EXPECT_EQ(std::vector<std::string>(records.begin(), records.end() - 1), c.records);
}

TEST_F(JournalTest, TruncatedRecordHeaderIsDetectedForEveryShortLength) {
  const auto records = sample_records(12);
  const auto offsets = write_records(records);
  const std::string full = file_bytes();
  for (std::uint64_t k = 1; k <= 7; ++k) {
    SCOPED_TRACE("header bytes kept: " + std::to_string(k));
    set_file_bytes(full.substr(0, offsets.back() + k));
    auto c = read_ok();
    EXPECT_FALSE(c.clean);
    EXPECT_EQ(c.records.size(), 11u);
    EXPECT_EQ(c.good_bytes, offsets.back());
    EXPECT_NE(c.tail_error.find("truncated record header in record 12 at offset " +
                                std::to_string(offsets.back())),
              std::string::npos)
        << c.tail_error;
    EXPECT_NE(c.tail_error.find("(" + std::to_string(k) + " of 8 bytes)"), std::string::npos)
        << c.tail_error;
  }
}

// The last record is where a crash during the last group write leaves its damage: a torn tail.
TEST_F(JournalTest, FlippedPayloadByteInTheLastRecordIsATornTail) {
  const auto records = sample_records(40);
  const auto offsets = write_records(records);
  ASSERT_FALSE(records[39].empty());
  std::string bytes = file_bytes();
  bytes[offsets[39] + 8 + records[39].size() / 2] ^= 0x01;
  set_file_bytes(bytes);
  auto c = read_ok();
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records.size(), 39u);
  EXPECT_EQ(c.good_bytes, offsets[39]);
  EXPECT_EQ(c.tail_error.rfind(path_ + ": checksum mismatch in record 40 at offset " +
                                   std::to_string(offsets[39]) + " (stored 0x",
                               0),
            0u)
      << c.tail_error;
  EXPECT_EQ(std::vector<std::string>(records.begin(), records.begin() + 39), c.records);
}

TEST_F(JournalTest, FlippedChecksumByteInTheLastRecordIsATornTail) {
  const auto records = sample_records(10);
  const auto offsets = write_records(records);
  std::string bytes = file_bytes();
  bytes[offsets[9] + 5] ^= 0x80;
  set_file_bytes(bytes);
  auto c = read_ok();
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records.size(), 9u);
  EXPECT_NE(c.tail_error.find("checksum mismatch in record 10 at offset " +
                              std::to_string(offsets[9])),
            std::string::npos)
      << c.tail_error;
}

TEST_F(JournalTest, AbsurdLengthFieldInTheLastRecordIsOutOfRange) {
  const auto records = sample_records(10);
  const auto offsets = write_records(records);
  const std::string good = file_bytes();
  for (std::uint32_t bad : {0xFFFFFFFFu, kMaxJournalRecord + 1}) {
    SCOPED_TRACE("length " + std::to_string(bad));
    std::string bytes = good;
    for (int b = 0; b < 4; ++b) bytes[offsets[9] + b] = static_cast<char>((bad >> (8 * b)) & 0xFF);
    set_file_bytes(bytes);
    auto c = read_ok();
    EXPECT_FALSE(c.clean);
    EXPECT_EQ(c.records.size(), 9u);
    EXPECT_EQ(c.good_bytes, offsets[9]);
    EXPECT_NE(c.tail_error.find("length out of range in record 10 at offset " +
                                std::to_string(offsets[9]) + " (" + std::to_string(bad) +
                                " bytes, limit "),
              std::string::npos)
        << c.tail_error;
  }
}

TEST_F(JournalTest, LengthPastEndOfFileIsATruncatedPayload) {
  const auto offsets = write_records({"aaaa", "bbbb"});
  std::string bytes = file_bytes();
  bytes[offsets[1]] = 100;  // claims 100 bytes, only 4 follow
  set_file_bytes(bytes);
  auto c = read_ok();
  EXPECT_EQ(c.records, std::vector<std::string>{"aaaa"});
  EXPECT_NE(c.tail_error.find("truncated payload in record 2 at offset " +
                              std::to_string(offsets[1]) + " (4 of 100 bytes)"),
            std::string::npos)
      << c.tail_error;
}

TEST_F(JournalTest, BadMagicIsAnErrorAndTheFileIsLeftAlone) {
  const std::string foreign = "NOTAJRNL\x05\x00\x00\x00whatever";
  set_file_bytes(foreign);
  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.reason().find("not a journal"), std::string::npos) << r.reason();
  EXPECT_NE(r.reason().find(path_), std::string::npos) << r.reason();

  auto w = JournalWriter::open(path_);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.reason().find(path_), std::string::npos) << w.reason();
  EXPECT_EQ(file_bytes(), foreign);  // never "repair" a file that is not ours
}

TEST_F(JournalTest, OtherFormatVersionIsAnError) {
  set_file_bytes("ORRJRNL2");
  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.reason().find("version"), std::string::npos) << r.reason();
  EXPECT_FALSE(JournalWriter::open(path_).ok());
  EXPECT_EQ(file_bytes(), "ORRJRNL2");
}

TEST_F(JournalTest, ShortOrEmptyFileIsNotAJournalForReading) {
  set_file_bytes("");
  EXPECT_FALSE(read_journal(path_).ok());
  set_file_bytes("ORRJ");
  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.reason().find("shorter"), std::string::npos) << r.reason();
}

TEST_F(JournalTest, OpenReinitialisesHeaderTornAtCreation) {
  set_file_bytes("ORRJ");
  auto w = open_ok();
  EXPECT_NE(w->recovered_tail_error().find("torn header"), std::string::npos)
      << w->recovered_tail_error();
  ASSERT_TRUE(w->append("first").ok());
  ASSERT_TRUE(w->flush().ok());
  EXPECT_EQ(read_ok().records, std::vector<std::string>{"first"});
}

TEST_F(JournalTest, OpenTruncatesTornTailAndAppendsAfterGoodRecords) {
  const auto records = sample_records(20);
  const auto offsets = write_records(records);
  // A torn group: one complete record's worth of header plus part of its payload.
  std::string bytes = file_bytes();
  bytes += std::string("\x40\x00\x00\x00\x12\x34\x56\x78partial", 15);
  set_file_bytes(bytes);
  const std::uint64_t good_end = bytes.size() - 15;

  {
    auto w = open_ok({FsyncPolicy::kGroup, 4});
    EXPECT_NE(w->recovered_tail_error().find("truncated payload in record 21 at offset " +
                                             std::to_string(good_end)),
              std::string::npos)
        << w->recovered_tail_error();
    EXPECT_EQ(w->records(), 20u);
    EXPECT_EQ(w->durable_records(), 20u);
    EXPECT_EQ(file_size(), good_end);  // the tail is gone before anything new is written
    ASSERT_TRUE(w->append("after-1").ok());
    ASSERT_TRUE(w->append("").ok());
    ASSERT_TRUE(w->append("after-3").ok());
    ASSERT_TRUE(w->flush().ok());
    EXPECT_EQ(w->records(), 23u);
  }
  auto c = read_ok();
  EXPECT_TRUE(c.clean) << c.tail_error;
  ASSERT_EQ(c.records.size(), 23u);
  EXPECT_EQ(std::vector<std::string>(c.records.begin(), c.records.begin() + 20), records);
  EXPECT_EQ(c.records[20], "after-1");
  EXPECT_EQ(c.records[21], "");
  EXPECT_EQ(c.records[22], "after-3");

  // A clean journal reopens with no recovered error.
  auto w = open_ok();
  EXPECT_TRUE(w->recovered_tail_error().empty());
  EXPECT_EQ(w->records(), 23u);
  (void)offsets;
}

TEST_F(JournalTest, GarbageAppendedToACleanJournalIsATornTail) {
  const auto records = sample_records(20);
  write_records(records);
  const std::uint64_t good_end = file_size();
  std::string garbage(2u << 20, '\0');  // longer than the look-ahead window
  std::uint32_t x = 99;
  for (auto& ch : garbage) {
    x = x * 1103515245u + 12345u;
    ch = static_cast<char>(x >> 24);
  }
  set_file_bytes(file_bytes() + garbage);
  auto c = read_ok();
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records, records);
  EXPECT_EQ(c.good_bytes, good_end);
  EXPECT_NE(c.tail_error.find(" in record 21 at offset " + std::to_string(good_end)),
            std::string::npos)
      << c.tail_error;

  auto w = open_ok();
  EXPECT_EQ(w->recovered_tail_error(), c.tail_error);
  EXPECT_EQ(w->records(), 20u);
  EXPECT_EQ(file_size(), good_end);
}

// --- damage in the middle ----------------------------------------------------------------------

// What the scanner must say about a bad record `number` (1-based) at `bad` with a valid one at
// `next` after it.
void ExpectDamagedInTheMiddle(const std::string& reason, const std::string& path, int number,
                              std::uint64_t bad, std::uint64_t next) {
  EXPECT_EQ(reason.rfind(path + ": corrupt record " + std::to_string(number) + " at offset " +
                             std::to_string(bad) + " (",
                         0),
            0u)
      << reason;
  EXPECT_NE(reason.find(") followed by a valid record at offset " + std::to_string(next) +
                        ": the journal is damaged in the middle, not torn at the end; refusing "
                        "to recover"),
            std::string::npos)
      << reason;
}

// The case from review: one flipped byte in record 2 of 33 used to read as 1 good record and a
// "torn tail", and opening the journal cut it down to that record.
TEST_F(JournalTest, FlippedByteInAnEarlyRecordIsDamageInTheMiddle) {
  const auto records = sample_records(33);
  const auto offsets = write_records(records);
  ASSERT_FALSE(records[1].empty());
  std::string bytes = file_bytes();
  bytes[offsets[1] + 8 + 7] ^= 0x10;
  set_file_bytes(bytes);

  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok()) << "read " << r->records.size() << " records, tail: " << r->tail_error;
  ExpectDamagedInTheMiddle(r.reason(), path_, 2, offsets[1], offsets[2]);
  EXPECT_NE(r.reason().find("(checksum mismatch: stored 0x"), std::string::npos) << r.reason();

  auto w = JournalWriter::open(path_);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.reason(), r.reason());
  EXPECT_EQ(orrery::testing::read_bytes(path_), bytes);  // nothing truncated, nothing written
  // The failed open let go of its lock: a second try says the same, not "another writer".
  auto again = JournalWriter::open(path_, {FsyncPolicy::kAlways, 1});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.reason(), r.reason());
  EXPECT_EQ(orrery::testing::read_bytes(path_), bytes);
}

// Every kind of damage to every record but the last is found, and the valid record reported is the
// very next one; the same damage to the last record is a torn tail.
TEST_F(JournalTest, DamageToAnyRecordButTheLastIsAnError) {
  const auto records = sample_records(60);  // sizes 0 to 70051 bytes
  const auto offsets = write_records(records);
  const std::string good = file_bytes();
  constexpr std::uint64_t kLast = ~std::uint64_t{0};
  struct Hit {
    const char* what;
    std::uint64_t at;  // from the record's start; kLast: its last payload byte
    unsigned char mask;
  };
  const Hit hits[] = {
      {"length low byte", 0, 0x01},    {"length high byte", 3, 0x80},
      {"crc byte", 6, 0x04},           {"first payload byte", 8, 0x01},
      {"last payload byte", kLast, 0x40},
  };
  for (std::size_t i = 0; i < records.size(); ++i) {
    for (const Hit& h : hits) {
      if (h.at >= 8 && records[i].empty()) continue;  // no payload to hit
      SCOPED_TRACE("record " + std::to_string(i + 1) + ", " + h.what);
      std::string bytes = good;
      const std::uint64_t at =
          h.at == kLast ? offsets[i] + 8 + records[i].size() - 1 : offsets[i] + h.at;
      bytes[at] = static_cast<char>(bytes[at] ^ h.mask);
      set_file_bytes(bytes);
      auto r = read_journal(path_);
      if (i + 1 < records.size()) {
        ASSERT_FALSE(r.ok()) << r->tail_error;
        ExpectDamagedInTheMiddle(r.reason(), path_, static_cast<int>(i + 1), offsets[i],
                                 offsets[i + 1]);
      } else {
        ASSERT_TRUE(r.ok()) << r.reason();
        EXPECT_FALSE(r->clean);
        EXPECT_EQ(r->records.size(), i);
        EXPECT_EQ(r->good_bytes, offsets[i]);
        EXPECT_NE(r->tail_error.find(" in record " + std::to_string(i + 1) + " at offset " +
                                     std::to_string(offsets[i])),
                  std::string::npos)
            << r->tail_error;
      }
    }
  }
}

// A damaged record longer than the 1 MiB window is stepped over by its own length; a valid record
// found after a damaged one may be long too (its checksum is derived from prefix CRCs).
TEST_F(JournalTest, DamageNextToLongRecordsIsFound) {
  const std::string big(3u << 20, 'B');
  const std::string bigger(5u << 20, 'C');
  const auto offsets = write_records({"fleet", big, "x", "yy", bigger, "z"});
  const std::string good = file_bytes();

  std::string bytes = good;
  bytes[offsets[1] + 8 + (2u << 20)] ^= 0x01;  // inside the 3 MiB record, 2 MiB in
  set_file_bytes(bytes);
  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  ExpectDamagedInTheMiddle(r.reason(), path_, 2, offsets[1], offsets[2]);

  bytes = good;
  bytes[offsets[3] + 8] ^= 0x01;  // "yy": the next record is the 5 MiB one
  set_file_bytes(bytes);
  r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  ExpectDamagedInTheMiddle(r.reason(), path_, 4, offsets[3], offsets[4]);

  auto w = JournalWriter::open(path_);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(orrery::testing::read_bytes(path_), bytes);
}

// A bad length that claims more than the file holds is damage in the middle too when valid
// records follow.
TEST_F(JournalTest, LengthPastEndOfFileWithRecordsAfterIsAnError) {
  const auto offsets = write_records({"aaaa", "bbbb", "cccc"});
  std::string bytes = file_bytes();
  bytes[offsets[1]] = 100;  // claims 100 bytes, 16 follow
  set_file_bytes(bytes);
  auto r = read_journal(path_);
  ASSERT_FALSE(r.ok());
  ExpectDamagedInTheMiddle(r.reason(), path_, 2, offsets[1], offsets[2]);
  EXPECT_NE(r.reason().find("(truncated payload: 16 of 100 bytes)"), std::string::npos)
      << r.reason();
}

// The look-ahead's cost does not grow with the candidates' lengths: here half of the 1 MiB window
// are candidates claiming about 16 MiB each (hashing each would be terabytes of work).
TEST_F(JournalTest, LookAheadCostIsBoundedByTheWindow) {
  const auto offsets = write_records({"a", "b"});
  std::string bytes = file_bytes();
  bytes[offsets[1] + 8] ^= 0x01;
  std::string filler(1u << 20, '\0');
  for (std::size_t k = 0; k < filler.size(); k += 2) filler[k] = '\xFF';  // lengths 0x00FF00FF
  bytes += filler;
  bytes += std::string(kMaxJournalRecord + 16, '\0');
  set_file_bytes(bytes);
  auto c = read_ok();  // nothing valid in there: a torn tail
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records, std::vector<std::string>{"a"});
  EXPECT_NE(c.tail_error.find("checksum mismatch in record 2 at offset " +
                              std::to_string(offsets[1])),
            std::string::npos)
      << c.tail_error;
}

}  // namespace

// A crash can leave zero-filled space past the last record (length 0, crc 0). The checksum covers
// the length, so that is a torn tail, not a run of empty records.
TEST_F(JournalTest, ZeroFilledTailIsNotReadAsEmptyRecords) {
  const auto records = sample_records(5);
  const auto offsets = write_records(records);
  const auto size = file_size();
  {
    std::ofstream out(path_, std::ios::binary | std::ios::app);
    out << std::string(64, '\0');
  }
  auto c = read_ok();
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.records, records);
  EXPECT_EQ(c.good_bytes, size);
  EXPECT_NE(c.tail_error.find("checksum mismatch"), std::string::npos) << c.tail_error;
  (void)offsets;
}

TEST(RecordCrcTest, CoversTheLength) {
  EXPECT_NE(record_crc(""), 0u);
  EXPECT_NE(record_crc(std::string(1, '\0')), record_crc(std::string(2, '\0')));
  EXPECT_EQ(crc32c_extend(crc32c("1234"), "56789"), crc32c("123456789"));
}

}  // namespace orrery::core
