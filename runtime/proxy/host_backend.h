// The `host` backend: device memory emulated in the proxy's own host memory, mapped at exactly
// the device addresses (mmap MAP_FIXED_NOREPLACE), so a device address *is* a pointer in the
// proxy and kernels run on the CPU, inline. Splicing parks an allocation by moving its pages
// (mremap), not by copying them: the host-memory analogue of a D2H copy into pinned memory.
#pragma once

#include "runtime/proxy/backend.h"

namespace orrery::runtime {

std::unique_ptr<DeviceBackend> make_host_backend(int device, std::uint64_t mem_bytes);

}  // namespace orrery::runtime
