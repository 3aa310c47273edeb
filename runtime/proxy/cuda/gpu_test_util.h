// What the GPU tests share: whether a CUDA device is usable, and skipping (saying why) when it
// is not, so that they run everywhere and report Skipped without a GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace orrery::runtime::cuda {

// Empty when a CUDA device is usable, else why not.
inline std::string device_unavailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (count == 0) return "no devices found";
  return "";
}

}  // namespace orrery::runtime::cuda

#define SKIP_WITHOUT_DEVICE()                                                               \
  do {                                                                                      \
    if (const std::string why = ::orrery::runtime::cuda::device_unavailable(); !why.empty()) { \
      GTEST_SKIP() << "no CUDA device: " << why << " (GPU test skipped)";                   \
    }                                                                                       \
  } while (0)
