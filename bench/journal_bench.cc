// Append throughput of the decision journal (records/s) per fsync policy and record size. The
// target is >= 100,000 records/s with group commit. The journal lives in a fresh directory under
// /tmp (a real disk here, so fdatasync costs what it costs), removed after each run. Real time, not
// CPU time: a thread blocked in fdatasync uses no CPU, and CPU time would overstate records/s.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/journal.h"

namespace orrery::core {
namespace {

void BM_JournalAppend(benchmark::State& state, std::size_t record_bytes, FsyncPolicy policy,
                      std::size_t group_records) {
  char tmpl[] = "/tmp/orrery_journal_bench.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::filesystem::path dir = tmpl;
  {
    auto w = JournalWriter::open((dir / "bench.jrnl").string(), {policy, group_records});
    if (!w.ok()) {
      state.SkipWithError(w.reason().c_str());
    } else {
      auto& journal = *w.value();
      std::string payload(record_bytes, 'd');
      std::uint64_t n = 0;
      for (auto _ : state) {
        // Vary the payload a little so every record's CRC is computed on fresh bytes.
        payload[n % record_bytes] = static_cast<char>(n);
        ++n;
        Status s = journal.append(payload);
        if (!s.ok()) {
          state.SkipWithError(s.reason().c_str());
          break;
        }
      }
      // Outside the timed loop: at most one partial group, immaterial at these iteration counts.
      Status s = journal.flush();
      if (!s.ok()) state.SkipWithError(s.reason().c_str());
      state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
      state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * record_bytes));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

BENCHMARK_CAPTURE(BM_JournalAppend, group256_64B, 64, FsyncPolicy::kGroup, 256)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, group1024_64B, 64, FsyncPolicy::kGroup, 1024)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, always_64B, 64, FsyncPolicy::kAlways, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, never_64B, 64, FsyncPolicy::kNever, 256)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, group256_256B, 256, FsyncPolicy::kGroup, 256)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, group1024_256B, 256, FsyncPolicy::kGroup, 1024)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, always_256B, 256, FsyncPolicy::kAlways, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_JournalAppend, never_256B, 256, FsyncPolicy::kNever, 256)->UseRealTime();

}  // namespace
}  // namespace orrery::core
