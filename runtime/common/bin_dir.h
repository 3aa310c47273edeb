// Where orrery's binaries are: the ORRERY_BIN_DIR environment variable when set (a pack of the
// binaries run on another machine, scripts/gpu-test), else `built`, the build's own folder that
// tests and benchmarks are compiled with.
#pragma once

#include <cstdlib>
#include <string>

namespace orrery {

inline std::string bin_dir(const char* built) {
  const char* e = std::getenv("ORRERY_BIN_DIR");
  return e != nullptr && *e != '\0' ? e : built;
}

}  // namespace orrery
