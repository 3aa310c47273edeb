// CRC-32C for checkpoint shards: the same function as base/crc32c.h's crc32c_extend (the journal's),
// with the SSE4.2 crc32 instruction where the CPU has it. The software slicing-by-8 loop runs at 1-2
// GB/s, slower than writing a shard to the page cache; the instruction runs at ~8+ GB/s, so
// checksumming does not dominate checkpoint throughput.
#pragma once

#include <cstddef>
#include <cstdint>

namespace orrery::runtime {

std::uint32_t crc32c_fast_extend(std::uint32_t crc, const void* data, std::size_t n);
bool crc32c_fast_is_hardware();

}  // namespace orrery::runtime
