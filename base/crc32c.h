// CRC-32C (Castagnoli), the checksum of the journal's records (core/journal.h), of checkpoint shards
// on the wire and on disk (rpc/, core/service/checkpoint_store.h) and the portable fallback of the
// proxy's hardware CRC (runtime/proxy/crc32c_fast.h). Pure functions, no state.
#pragma once

#include <cstdint>
#include <string_view>

namespace orrery {

// CRC-32C of data.
std::uint32_t crc32c(std::string_view data);
// The CRC-32C of (what gave `crc`) followed by data: crc32c(a + b) == crc32c_extend(crc32c(a), b).
std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view data);

}  // namespace orrery
