// Parked device memory in chunks, for splicing that copies only what differs (the cuda backend's
// splice dedup, docs/cuda.md). Pure bookkeeping, tested without a GPU.
//
// A parked range (a run of a rank's adjacent allocations) is a list of kHashChunk chunks, each
// with the hash of its content and where its bytes are on the host. Ranks of one data-parallel job
// hold mostly equal bytes at the same addresses (parameters, optimizer state), so when a range is
// parked, a chunk whose content another parked rank already holds shares that rank's host bytes
// (no copy out), and when a range comes back, a chunk whose content the device still holds (the
// rank parked just before at the same addresses) is not copied in.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/proxy/cuda/chunk_hash.h"

namespace orrery::runtime::cuda {

inline std::uint64_t chunk_count(std::uint64_t n) { return (n + kHashChunk - 1) / kHashChunk; }
inline std::uint64_t chunk_bytes(std::uint64_t n, std::uint64_t c) {
  return n - c * kHashChunk < kHashChunk ? n - c * kHashChunk : kHashChunk;
}

struct ParkedChunk {
  Hash128 hash;
  std::shared_ptr<void> owner;     // keeps the host bytes alive; shared between ranks
  unsigned char* bytes = nullptr;  // chunk_bytes() bytes on the host
};

struct ParkedRange {
  std::uint64_t addr = 0, size = 0;
  std::vector<ParkedChunk> chunks;  // chunk_count(size) of them
};

// The parked ranges by (address, size): where a range being parked finds chunks to share.
class ParkedIndex {
 public:
  void add(const ParkedRange* r) { by_key_[{r->addr, r->size}].push_back(r); }
  void remove(const ParkedRange* r);
  // A parked chunk `c` of a range at (addr, size) whose content hashes to `h`, or nullptr.
  const ParkedChunk* find(std::uint64_t addr, std::uint64_t size, std::uint64_t c,
                          const Hash128& h) const;
  std::size_t ranges() const;

 private:
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<const ParkedRange*>> by_key_;
};

// What the device holds in ranges parked since (the content hashes computed when they were
// parked), until something maps, fills or frees part of them again.
class DeviceContent {
 public:
  void set(std::uint64_t addr, std::uint64_t size, std::vector<Hash128> hashes);
  // The hashes of exactly (addr, size), or nullptr.
  const std::vector<Hash128>* find(std::uint64_t addr, std::uint64_t size) const;
  // Forgets every range overlapping [addr, addr + n).
  void forget(std::uint64_t addr, std::uint64_t n);
  std::size_t ranges() const { return by_addr_.size(); }

 private:
  struct Entry {
    std::uint64_t size;
    std::vector<Hash128> hashes;
  };
  std::map<std::uint64_t, Entry> by_addr_;
};

// Consecutive chunks to copy as one transfer: chunks [first, first + count) of a range, whose
// host bytes are contiguous too.
struct CopyRun {
  std::uint64_t first = 0, count = 0;
  unsigned char* host = nullptr;
  std::uint64_t bytes = 0;
};
// The runs covering the chunks of `r` marked in `copy`.
std::vector<CopyRun> copy_runs(const ParkedRange& r, const std::vector<bool>& copy);

}  // namespace orrery::runtime::cuda
