// The decision journal: framing, group commit, tail recovery and detection of damage in the middle.
// The contract is in journal.h.
#include "core/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "base/crc32c.h"

namespace orrery::core {
namespace {

constexpr std::size_t kFileHeaderBytes = 8;
constexpr std::size_t kRecordHeaderBytes = 8;  // length:u32le crc:u32le
constexpr std::size_t kReadChunk = 1u << 20;
// After a bad record, how many start offsets past it are tried for a later valid record.
constexpr std::uint64_t kLookAheadWindow = 1u << 20;
constexpr std::uint32_t kCrcPoly = 0x82F63B78u;  // reflected CRC-32C polynomial

std::string errno_text(int err) { return std::generic_category().message(err); }

Status io_error(std::string_view what, const std::string& path, int err) {
  std::string reason(what);
  reason += ' ';
  reason += path;
  reason += ": ";
  reason += errno_text(err);
  return Status::Error(std::move(reason));
}

std::string hex32(std::uint32_t v) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Printable rendering of a few bytes for error messages (a bad header may be anything).
std::string escaped(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

void put_le32(std::string& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v & 0xFFu), static_cast<char>((v >> 8) & 0xFFu),
                     static_cast<char>((v >> 16) & 0xFFu), static_cast<char>((v >> 24) & 0xFFu)};
  out.append(b, 4);
}

std::uint32_t get_le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return std::uint32_t{u[0]} | (std::uint32_t{u[1]} << 8) | (std::uint32_t{u[2]} << 16) |
         (std::uint32_t{u[3]} << 24);
}

// Owns a file descriptor; closes it on every early return.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// write() until everything is out: write may be partial (signals, quotas, pipes) or EINTR.
Status write_all(int fd, const char* data, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write journal", path, errno);
    }
    if (w == 0) return io_error("cannot write journal", path, EIO);  // would spin forever
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return Status::Ok();
}

Status sync_data(int fd, const std::string& path) {
  int rc;
  do {
    rc = ::fdatasync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return io_error("cannot fdatasync journal", path, errno);
  return Status::Ok();
}

// A newly created file is durable only once its directory entry is: fsync the parent directory.
Status sync_parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : path.substr(0, slash));
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0) return io_error("cannot open directory of journal", path, errno);
  if (::fsync(d.get()) != 0) return io_error("cannot fsync directory of journal", path, errno);
  return Status::Ok();
}

// Sequential reader over a file by pread, keeping a window of at least the bytes asked for.
class ChunkReader {
 public:
  ChunkReader(int fd, const std::string& path) : fd_(fd), path_(path) {}

  // Makes at least `n` bytes available from the current position, fewer only at end of file.
  // Returns how many are available.
  Result<std::size_t> fill(std::size_t n) {
    while (buf_.size() - pos_ < n && !eof_) {
      if (pos_ > 0) {  // drop consumed bytes; the tail that stays is shorter than one record
        buf_.erase(0, pos_);
        pos_ = 0;
      }
      const std::size_t want = std::max(n - buf_.size(), kReadChunk);
      const std::size_t old = buf_.size();
      buf_.resize(old + want);
      ssize_t r;
      do {
        r = ::pread(fd_, buf_.data() + old, want, static_cast<off_t>(file_off_));
      } while (r < 0 && errno == EINTR);
      if (r < 0) {
        const int err = errno;
        buf_.resize(old);
        return io_error("cannot read journal", path_, err);
      }
      buf_.resize(old + static_cast<std::size_t>(r));
      file_off_ += static_cast<std::uint64_t>(r);
      if (r == 0) eof_ = true;
    }
    return buf_.size() - pos_;
  }
  const char* data() const { return buf_.data() + pos_; }
  void consume(std::size_t n) { pos_ += n; }
  // The end of file as this reader found it, or UINT64_MAX when it has not reached it yet.
  std::uint64_t end_seen() const { return eof_ ? file_off_ : UINT64_MAX; }

 private:
  int fd_;
  const std::string& path_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t file_off_ = 0;  // file offset of buf_'s end
  bool eof_ = false;
};

// pread until `n` bytes are in `out` (appended) or end of file; returns how many were read.
Result<std::size_t> read_at(int fd, const std::string& path, std::uint64_t off, std::size_t n,
                            std::string& out) {
  const std::size_t old = out.size();
  out.resize(old + n);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, out.data() + old + done, n - done,
                              static_cast<off_t>(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      out.resize(old + done);
      return io_error("cannot read journal", path, err);
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  out.resize(old + done);
  return done;
}

// a * b in GF(2)[x] modulo the CRC-32C polynomial, in the CRC's reflected bit order (bit 31 is
// x^0, bit 0 is x^31).
constexpr std::uint32_t gf2_mul(std::uint32_t a, std::uint32_t b) {
  std::uint32_t p = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) p ^= b;
    b = (b & 1u) ? (b >> 1) ^ kCrcPoly : b >> 1;  // b *= x
  }
  return p;
}

// kXPow2k[k] = x^(2^k) mod P.
constexpr std::array<std::uint32_t, 64> make_x_pow2k() {
  std::array<std::uint32_t, 64> t{};
  t[0] = 1u << 30;  // x^1
  for (std::size_t k = 1; k < t.size(); ++k) t[k] = gf2_mul(t[k - 1], t[k - 1]);
  return t;
}
constexpr std::array<std::uint32_t, 64> kXPow2k = make_x_pow2k();

// What feeding n zero bytes does to the CRC's linear part: crc32c(a + b) ==
// crc_shift(crc32c(a), b.size()) ^ crc32c(b). O(log n).
std::uint32_t crc_shift(std::uint32_t crc, std::uint64_t n) {
  std::uint32_t xn = 1u << 31;  // x^0
  std::uint64_t bits = n * 8;
  for (std::size_t k = 0; bits != 0; ++k, bits >>= 1) {
    if (bits & 1u) xn = gf2_mul(kXPow2k[k], xn);
  }
  return gf2_mul(xn, crc);
}

struct LaterRecord {
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

// Looks for a valid record after a bad one at `bad_off`: at every start offset from bad_off + 1
// through bad_off + kLookAheadWindow, and at `claimed_next` (where the next record starts if the
// bad record's length is right; 0 for none), each needing a length <= kMaxJournalRecord, its whole
// payload before the end of the file (`end_limit` caps that end), and a matching checksum. Returns
// the lowest-offset one, or nothing.
//
// Checking each candidate by hashing its payload could cost the window times 16 MiB. Instead the
// region is hashed once: with P(i) the CRC-32C of the region's first i bytes, the CRC of bytes
// [s, e) is P(e) ^ crc_shift(P(s), e - s), so a record whose length bytes start at p checks as
// crc_shift(crc32c(length bytes) ^ P(p + 8), length) ^ P(p + 8 + length) == stored crc. The work is
// one pass over at most 1 MiB + 32 MiB plus a sort of the candidates' payload bounds.
Result<std::optional<LaterRecord>> find_later_record(int fd, const std::string& path,
                                                     std::uint64_t bad_off,
                                                     std::uint64_t claimed_next,
                                                     std::uint64_t end_limit) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error("cannot stat journal", path, errno);
  std::uint64_t limit = std::min(end_limit, static_cast<std::uint64_t>(st.st_size));
  const std::uint64_t base = bad_off + 1;
  if (base + kRecordHeaderBytes > limit) return std::optional<LaterRecord>();
  const std::uint64_t last_start = std::min(bad_off + kLookAheadWindow, limit - kRecordHeaderBytes);

  // The record headers in the window; data[i] is the byte at file offset base + i.
  std::string data;
  auto got = read_at(fd, path, base, last_start + kRecordHeaderBytes - base, data);
  if (!got) return got.status();
  if (base + data.size() < last_start + kRecordHeaderBytes) {  // shrank under us
    limit = base + data.size();
  }

  struct Candidate {
    std::uint64_t offset;
    std::uint32_t length;
    std::uint32_t crc;
    std::uint32_t length_crc;  // crc32c of the four length bytes
  };
  std::vector<Candidate> cands;
  auto consider = [&](std::uint64_t p, const char* header) {
    const std::uint32_t length = get_le32(header);
    if (length > kMaxJournalRecord || p + kRecordHeaderBytes + length > limit) return;
    cands.push_back({p, length, get_le32(header + 4), crc32c(std::string_view(header, 4))});
  };
  for (std::uint64_t p = base; p + kRecordHeaderBytes <= base + data.size() && p <= last_start;
       ++p) {
    consider(p, data.data() + (p - base));
  }
  if (claimed_next > last_start && claimed_next + kRecordHeaderBytes <= limit) {
    std::string header;
    got = read_at(fd, path, claimed_next, kRecordHeaderBytes, header);
    if (!got) return got.status();
    if (*got == kRecordHeaderBytes) consider(claimed_next, header.data());
  }
  if (cands.empty()) return std::optional<LaterRecord>();

  // Everything up to the furthest candidate's end.
  std::uint64_t region_end = base + data.size();
  for (const auto& c : cands) {
    region_end = std::max(region_end, c.offset + kRecordHeaderBytes + c.length);
  }
  if (region_end > base + data.size()) {
    const std::uint64_t have = base + data.size();
    got = read_at(fd, path, have, region_end - have, data);
    if (!got) return got.status();
  }
  const std::uint64_t data_end = base + data.size();

  // P at every payload start and end (empty payloads need none: their CRC is the length's).
  std::vector<std::uint64_t> at;
  for (const auto& c : cands) {
    if (c.length == 0 || c.offset + kRecordHeaderBytes + c.length > data_end) continue;
    at.push_back(c.offset + kRecordHeaderBytes - base);
    at.push_back(c.offset + kRecordHeaderBytes + c.length - base);
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  std::vector<std::uint32_t> prefix(at.size());
  std::uint32_t running = 0;
  std::uint64_t pos = 0;
  for (std::size_t i = 0; i < at.size(); ++i) {
    running = crc32c_extend(running, std::string_view(data.data() + pos, at[i] - pos));
    pos = at[i];
    prefix[i] = running;
  }
  auto prefix_at = [&](std::uint64_t i) {
    return prefix[std::lower_bound(at.begin(), at.end(), i) - at.begin()];
  };

  for (const auto& c : cands) {  // in offset order
    const std::uint64_t s = c.offset + kRecordHeaderBytes;
    if (s + c.length > data_end) continue;  // the file shrank under us
    std::uint32_t crc = c.length_crc;
    if (c.length > 0) {
      crc = crc_shift(crc ^ prefix_at(s - base), c.length) ^ prefix_at(s + c.length - base);
    }
    if (crc == c.crc) return std::optional<LaterRecord>(LaterRecord{c.offset, c.length});
  }
  return std::optional<LaterRecord>();
}

struct ScanResult {
  std::uint64_t count = 0;
  std::uint64_t good_bytes = 0;
  bool clean = true;
  std::string tail_error;
};

// Validates the header and every record; hands each good payload to `sink` when it is not empty
// (the writer only needs the count and where the good part ends), stopping early when it returns
// false. A bad record is a torn tail unless a valid record follows it (see find_later_record): then
// the journal is damaged in the middle and that is an error.
Result<ScanResult> scan_journal(int fd, const std::string& path, const RecordSink& sink) {
  ChunkReader in(fd, path);
  auto got = in.fill(kFileHeaderBytes);
  if (!got) return got.status();
  const std::string_view head(in.data(), *got);
  if (head.size() < kFileHeaderBytes) {
    return Status::Error("not a journal: " + path + " is " + std::to_string(head.size()) +
                         " bytes, shorter than the 8-byte \"ORRJRNL1\" header");
  }
  if (head.substr(0, kFileHeaderBytes) != kJournalMagic) {
    const std::string_view found = head.substr(0, kFileHeaderBytes);
    if (found.substr(0, 7) == kJournalMagic.substr(0, 7)) {
      return Status::Error("unsupported journal format version in " + path + ": header \"" +
                           escaped(found) + "\", this build reads \"ORRJRNL1\"");
    }
    return Status::Error("not a journal: " + path + " has header \"" + escaped(found) +
                         "\", expected \"ORRJRNL1\"");
  }
  in.consume(kFileHeaderBytes);

  ScanResult res;
  res.good_bytes = kFileHeaderBytes;
  std::string what;    // why the record at res.good_bytes is bad; empty at a clean end
  std::string detail;  // the particulars, in parentheses in the messages
  std::uint64_t claimed_next = 0;  // where the next record starts if the bad one's length is right
  for (;;) {
    got = in.fill(kRecordHeaderBytes);
    if (!got) return got.status();
    if (*got == 0) break;  // clean end
    if (*got < kRecordHeaderBytes) {
      what = "truncated record header";
      detail = std::to_string(*got) + " of 8 bytes";
      break;
    }
    const std::uint32_t length = get_le32(in.data());
    const std::uint32_t stored_crc = get_le32(in.data() + 4);
    if (length > kMaxJournalRecord) {
      what = "length out of range";
      detail = std::to_string(length) + " bytes, limit " + std::to_string(kMaxJournalRecord);
      break;
    }
    const std::size_t need = kRecordHeaderBytes + length;
    got = in.fill(need);
    if (!got) return got.status();
    if (*got < need) {
      what = "truncated payload";
      detail = std::to_string(*got - kRecordHeaderBytes) + " of " + std::to_string(length) +
               " bytes";
      break;
    }
    const std::string_view payload(in.data() + kRecordHeaderBytes, length);
    const std::uint32_t crc = record_crc(payload);
    if (crc != stored_crc) {
      what = "checksum mismatch";
      detail = "stored " + hex32(stored_crc) + ", computed " + hex32(crc);
      claimed_next = res.good_bytes + need;
      break;
    }
    const bool more = !sink || sink(payload);
    in.consume(need);
    ++res.count;
    res.good_bytes += need;
    if (!more) return res;
  }
  if (what.empty()) return res;

  // Records are numbered from 1 in file order (record 1 is the first after the header).
  const std::string record = "record " + std::to_string(res.count + 1) + " at offset " +
                             std::to_string(res.good_bytes);
  auto later = find_later_record(fd, path, res.good_bytes, claimed_next, in.end_seen());
  if (!later) return later.status();
  if (later->has_value()) {
    return Status::Error(path + ": corrupt " + record + " (" + what + ": " + detail +
                         ") followed by a valid record at offset " +
                         std::to_string((*later)->offset) +
                         ": the journal is damaged in the middle, not torn at the end; refusing "
                         "to recover");
  }
  res.clean = false;
  res.tail_error = path + ": " + what + " in " + record + " (" + detail + ")";
  return res;
}

}  // namespace

std::uint32_t record_crc(std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  const char length[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                          static_cast<char>((n >> 16) & 0xff), static_cast<char>(n >> 24)};
  return crc32c_extend(crc32c(std::string_view(length, 4)), payload);
}

struct JournalWriter::Impl {
  std::string path;
  JournalOptions options;
  Fd fd;
  std::string buffer;            // framed records not yet written
  std::uint64_t buffered = 0;    // records in `buffer`
  std::uint64_t durable = 0;     // records written (and synced per policy)
  std::uint64_t file_bytes = 0;  // end of what was written; a failed write is cut back to it
  std::string tail_error;
  // After a failed fdatasync the kernel may have dropped the dirty pages while clearing the error
  // (so a retry would "succeed" without the data): nothing more is accepted. Reopen to recover.
  std::string broken;

  bool syncs() const { return options.fsync != FsyncPolicy::kNever; }

  // Writes the buffered group with one write() loop, then syncs when `sync`. On a failed write the
  // file is cut back to its previous end and the group stays buffered, so a later flush() can
  // retry it.
  Status write_group(bool sync) {
    if (!broken.empty()) return Status::Error(broken);
    if (buffer.empty()) return Status::Ok();
    Status s = write_all(fd.get(), buffer.data(), buffer.size(), path);
    if (!s.ok()) {
      if (::ftruncate(fd.get(), static_cast<off_t>(file_bytes)) != 0 ||
          ::lseek(fd.get(), static_cast<off_t>(file_bytes), SEEK_SET) < 0) {
        broken = s.reason() + "; and cannot cut the partial write back (" + errno_text(errno) +
                 "): journal unusable, reopen it";
        return Status::Error(broken);
      }
      return s;
    }
    file_bytes += buffer.size();
    if (sync) {
      s = sync_data(fd.get(), path);
      if (!s.ok()) {
        broken = s.reason() + ": journal unusable, reopen it";
        return Status::Error(broken);
      }
    }
    durable += buffered;
    buffered = 0;
    buffer.clear();
    return Status::Ok();
  }

  Status init_header() {
    if (::ftruncate(fd.get(), 0) != 0) return io_error("cannot truncate journal", path, errno);
    if (::lseek(fd.get(), 0, SEEK_SET) < 0) return io_error("cannot seek journal", path, errno);
    Status s = write_all(fd.get(), kJournalMagic.data(), kJournalMagic.size(), path);
    if (!s.ok()) return s;
    file_bytes = kFileHeaderBytes;
    if (syncs()) {
      if (s = sync_data(fd.get(), path); !s.ok()) return s;
      if (s = sync_parent_dir(path); !s.ok()) return s;
    }
    return Status::Ok();
  }
};

Result<std::unique_ptr<JournalWriter>> JournalWriter::open(const std::string& path,
                                                           JournalOptions options) {
  if (options.group_records == 0) {
    return Status::Error("cannot open journal " + path + ": group_records must be >= 1");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->fd = Fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (impl->fd.get() < 0) return io_error("cannot open journal", path, errno);
  const int fd = impl->fd.get();
  // Two writers would interleave groups and each truncate the other's "torn" tail.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::Error("cannot open journal " + path + ": already open by another writer");
    }
    return io_error("cannot lock journal", path, errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error("cannot stat journal", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::Error("cannot open journal " + path + ": not a regular file");
  }

  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string short_head;
  if (size > 0 && size < kFileHeaderBytes) {
    short_head.resize(size);
    ssize_t r;
    do {
      r = ::pread(fd, short_head.data(), short_head.size(), 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return io_error("cannot read journal", path, errno);
    short_head.resize(static_cast<std::size_t>(r));
  }
  if (size == 0) {
    if (Status s = impl->init_header(); !s.ok()) return s;
  } else if (!short_head.empty() && kJournalMagic.substr(0, short_head.size()) == short_head) {
    // A crash while the journal was being created: no record can exist yet, so start it over.
    if (Status s = impl->init_header(); !s.ok()) return s;
    impl->tail_error = path + ": torn header (" + std::to_string(short_head.size()) +
                       " of 8 bytes) from an interrupted creation; journal reinitialised";
  } else {
    auto scan = scan_journal(fd, path, RecordSink());
    if (!scan) return scan.status();  // damaged in the middle among others: the file is untouched
    if (!scan->clean) {
      if (::ftruncate(fd, static_cast<off_t>(scan->good_bytes)) != 0) {
        return io_error("cannot truncate torn tail of journal", path, errno);
      }
      if (impl->syncs()) {
        if (Status s = sync_data(fd, path); !s.ok()) return s;
      }
      impl->tail_error = scan->tail_error;
    }
    impl->durable = scan->count;
    impl->file_bytes = scan->good_bytes;
    if (::lseek(fd, static_cast<off_t>(scan->good_bytes), SEEK_SET) < 0) {
      return io_error("cannot seek journal", path, errno);
    }
  }
  // Group sizes are typically small records; avoid regrowing the buffer early in each group.
  impl->buffer.reserve(std::min<std::size_t>(options.group_records, 4096) * 128);

  std::unique_ptr<JournalWriter> w(new JournalWriter());
  w->impl_ = std::move(impl);
  return w;
}

JournalWriter::~JournalWriter() {
  if (impl_) (void)flush();
}

Status JournalWriter::append(std::string_view payload) {
  Impl& im = *impl_;
  if (!im.broken.empty()) return Status::Error(im.broken);
  if (payload.size() > kMaxJournalRecord) {
    return Status::Error("cannot append to journal " + im.path + ": record of " +
                         std::to_string(payload.size()) + " bytes exceeds the limit of " +
                         std::to_string(kMaxJournalRecord));
  }
  const std::size_t mark = im.buffer.size();
  put_le32(im.buffer, static_cast<std::uint32_t>(payload.size()));
  put_le32(im.buffer, record_crc(payload));
  im.buffer.append(payload);
  ++im.buffered;

  const bool always = im.options.fsync == FsyncPolicy::kAlways;
  if (!always && im.buffered < im.options.group_records) return Status::Ok();
  Status s = im.write_group(im.syncs());
  if (!s.ok() && im.broken.empty()) {
    // The write failed and was cut back: this record was not accepted (earlier ones, already
    // acknowledged, stay buffered for a retry).
    im.buffer.resize(mark);
    --im.buffered;
  }
  return s;
}

Status JournalWriter::flush() { return impl_->write_group(impl_->syncs()); }

std::uint64_t JournalWriter::records() const { return impl_->durable + impl_->buffered; }

std::uint64_t JournalWriter::durable_records() const { return impl_->durable; }

const std::string& JournalWriter::recovered_tail_error() const { return impl_->tail_error; }

Result<JournalContents> read_journal(const std::string& path) {
  std::vector<std::string> records;
  auto c = stream_journal(path, [&records](std::string_view payload) {
    records.emplace_back(payload);
    return true;
  });
  if (c) c->records = std::move(records);
  return c;
}

Result<JournalContents> stream_journal(const std::string& path, const RecordSink& on_record) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error("cannot open journal", path, errno);
  auto scan = scan_journal(fd.get(), path, on_record);
  if (!scan) return scan.status();
  JournalContents c;
  c.good_bytes = scan->good_bytes;
  c.clean = scan->clean;
  c.tail_error = std::move(scan->tail_error);
  return c;
}

}  // namespace orrery::core
