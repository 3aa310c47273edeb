// orrery-gpu-info: lists the CUDA devices a device proxy on this machine could own (name, memory,
// compute capability). Exits 0 and says so when there is no usable device, so it doubles as the
// GPU-presence probe for tests that need one. Runtime API only: libcudart loads the driver itself,
// so the binary starts on machines without one (linking libcuda directly would not).
#include <cstdio>

#include <cuda_runtime.h>

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s (GPU checks skip)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return 0;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("%d CUDA device(s), driver %d, runtime %d\n", count, driver, runtime);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    std::printf("  device %d: %s, %zu MiB, sm_%d%d\n", i, p.name, p.totalGlobalMem >> 20, p.major,
                p.minor);
  }
  return 0;
}
