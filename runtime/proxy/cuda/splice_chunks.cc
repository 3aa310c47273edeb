#include "runtime/proxy/cuda/splice_chunks.h"

#include <algorithm>

namespace orrery::runtime::cuda {

void ParkedIndex::remove(const ParkedRange* r) {
  auto it = by_key_.find({r->addr, r->size});
  if (it == by_key_.end()) return;
  std::erase(it->second, r);
  if (it->second.empty()) by_key_.erase(it);
}

const ParkedChunk* ParkedIndex::find(std::uint64_t addr, std::uint64_t size, std::uint64_t c,
                                     const Hash128& h) const {
  auto it = by_key_.find({addr, size});
  if (it == by_key_.end()) return nullptr;
  for (const ParkedRange* r : it->second) {
    if (c < r->chunks.size() && r->chunks[c].bytes != nullptr && r->chunks[c].hash == h) {
      return &r->chunks[c];
    }
  }
  return nullptr;
}

std::size_t ParkedIndex::ranges() const {
  std::size_t n = 0;
  for (const auto& [key, v] : by_key_) n += v.size();
  return n;
}

void DeviceContent::set(std::uint64_t addr, std::uint64_t size, std::vector<Hash128> hashes) {
  forget(addr, size);
  by_addr_[addr] = Entry{size, std::move(hashes)};
}

const std::vector<Hash128>* DeviceContent::find(std::uint64_t addr, std::uint64_t size) const {
  auto it = by_addr_.find(addr);
  return it != by_addr_.end() && it->second.size == size ? &it->second.hashes : nullptr;
}

void DeviceContent::forget(std::uint64_t addr, std::uint64_t n) {
  for (auto it = by_addr_.begin(); it != by_addr_.end();) {
    const bool overlaps = it->first < addr + n && addr < it->first + it->second.size;
    it = overlaps ? by_addr_.erase(it) : std::next(it);
  }
}

std::vector<CopyRun> copy_runs(const ParkedRange& r, const std::vector<bool>& copy) {
  std::vector<CopyRun> runs;
  for (std::uint64_t c = 0; c < r.chunks.size(); ++c) {
    if (!copy[c]) continue;
    const std::uint64_t len = chunk_bytes(r.size, c);
    CopyRun* last = runs.empty() ? nullptr : &runs.back();
    if (last != nullptr && last->first + last->count == c && last->host + last->bytes == r.chunks[c].bytes) {
      ++last->count;
      last->bytes += len;
    } else {
      runs.push_back({c, 1, r.chunks[c].bytes, len});
    }
  }
  return runs;
}

}  // namespace orrery::runtime::cuda
