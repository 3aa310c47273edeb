// Helpers shared by the files that define ProxyServer (proxy_server.cc and its proxy_*.cc
// siblings); not for anyone else.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/proxy/ring.h"

namespace orrery::runtime::proxy_internal {

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

inline std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// code 1: the request failed; code 2: the worker's session is over (fenced, stopped, dropped).
inline Response error_response(const std::string& why, int code = 1) {
  Response r;
  r.code = code;
  std::snprintf(r.error, sizeof r.error, "%s", why.c_str());
  return r;
}

// The host group's step for the allreduce of worker step s: two ahead, so that the two steps
// before a job incarnation's first one (the negotiation's rounds) are never negative.
inline std::int64_t group_step(std::int64_t s) { return s + 2; }

}  // namespace orrery::runtime::proxy_internal
