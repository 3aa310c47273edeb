// CRC-32C (Castagnoli), software, slicing-by-8. The tables are computed at compile time, so there
// is no mutable global state and no initialisation order to worry about. Hardware CRC (SSE4.2
// crc32 / ARMv8 crc32c) would be faster still, but the journal's throughput is bound by syscalls,
// not by this loop (about 1-2 GB/s here), and portable code keeps the build free of target flags.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/crc32c.h"

namespace orrery {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial 0x1EDC6F41

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  // t[s][i] is the CRC of byte i followed by s zero bytes: lets the loop fold 8 bytes at once.
  for (std::size_t s = 1; s < 8; ++s) {
    for (std::uint32_t i = 0; i < 256; ++i) {
      t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
    }
  }
  return t;
}

constexpr Tables kTables = make_tables();

// Little-endian load independent of host byte order and alignment.
inline std::uint32_t load_le32(const unsigned char* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}

}  // namespace

std::uint32_t crc32c(std::string_view data) { return crc32c_extend(0, data); }

std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint32_t c = crc ^ 0xFFFFFFFFu;
  while (n >= 8) {
    const std::uint32_t lo = load_le32(p) ^ c;
    const std::uint32_t hi = load_le32(p + 4);
    c = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFFu] ^ kTables[2][(hi >> 8) & 0xFFu] ^
        kTables[1][(hi >> 16) & 0xFFu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFFu];
  return c ^ 0xFFFFFFFFu;
}

}  // namespace orrery
