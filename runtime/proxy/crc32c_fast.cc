#include "runtime/proxy/crc32c_fast.h"

#include <cstring>
#include <string_view>

#include "base/crc32c.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace orrery::runtime {
namespace {

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t hw(std::uint32_t crc, const unsigned char* p,
                                                   std::size_t n) {
  std::uint64_t c = ~crc;
  while (n >= 8) {
    std::uint64_t a;
    std::memcpy(&a, p, 8);
    c = _mm_crc32_u64(c, a);
    p += 8;
    n -= 8;
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#endif

}  // namespace

bool crc32c_fast_is_hardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

std::uint32_t crc32c_fast_extend(std::uint32_t crc, const void* data, std::size_t n) {
#if defined(__x86_64__)
  if (crc32c_fast_is_hardware()) return hw(crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_extend(crc, std::string_view(static_cast<const char*>(data), n));
}

}  // namespace orrery::runtime
