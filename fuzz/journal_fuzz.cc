// libFuzzer target: the journal reader on arbitrary files. The input is written to a scratch file
// (read_journal reads paths) and read both ways; every record read, and the raw input itself, goes
// through decode_record, and fleet records through Fleet::parse. Nothing may crash, and the two
// read paths must agree on what they found.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/decision.h"
#include "core/fleet.h"
#include "core/journal.h"

namespace {

const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/orrery-journal-fuzz-" +
           std::to_string(getpid());
  }();
  return path;
}

void decode(std::string_view payload) {
  auto d = orrery::core::decode_record(payload);
  if (!d.ok()) return;
  if (d->kind == orrery::core::RecordKind::kFleet) {
    auto f = orrery::core::Fleet::parse(d->fleet_text);
    (void)f;
  } else if (d->kind == orrery::core::RecordKind::kDecision) {
    (void)d->decision.describe();
  } else {
    (void)d->node.describe();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  decode(bytes);

  const std::string& path = scratch_path();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) std::abort();
  std::size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<std::size_t>(n);
  }
  ::close(fd);

  auto whole = orrery::core::read_journal(path);
  std::vector<std::string> streamed;
  auto stream = orrery::core::stream_journal(path, [&](std::string_view p) {
    streamed.emplace_back(p);
    return true;
  });
  if (whole.ok() != stream.ok()) std::abort();
  if (whole.ok()) {
    if (whole->records != streamed || whole->good_bytes != stream->good_bytes ||
        whole->clean != stream->clean || whole->good_bytes > size)
      std::abort();
    for (const auto& r : whole->records) decode(r);
  }
  ::unlink(path.c_str());
  return 0;
}
