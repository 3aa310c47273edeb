#include "runtime/proxy/backend.h"

#include <string>

#include "runtime/proxy/host_backend.h"
#ifdef ORRERY_HAVE_CUDA
#include "runtime/proxy/cuda/cuda_backend.h"
#endif

namespace orrery::runtime {

Result<std::unique_ptr<DeviceBackend>> make_backend(std::string_view name, int device,
                                                    std::uint64_t mem_bytes,
                                                    const BackendOptions& options) {
  if (name == "host") return make_host_backend(device, mem_bytes);  // moves pages: no copies
#ifdef ORRERY_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend(device, mem_bytes, options);
  return Status::Error("unknown backend '" + std::string(name) + "' (built: host, cuda)");
#else
  (void)options;
  return Status::Error("unknown backend '" + std::string(name) +
                       "' (built: host; the cuda backend is built only where nvcc is found)");
#endif
}

}  // namespace orrery::runtime
