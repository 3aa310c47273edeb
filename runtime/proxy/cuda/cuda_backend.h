// The `cuda` backend of orrery-proxy: one CUDA device, its memory mapped at the proxy's fixed
// addresses through the virtual memory management API, so a restored or migrated worker finds
// its pointers valid in a new proxy process (docs/cuda.md).
//
// - Addresses: each job's 64 GiB window (address_space.h) is reserved with cuMemAddressReserve at
//   exactly its address, on first use; physical memory is created with cuMemCreate in
//   allocation-granularity segments and mapped with cuMemMap/cuMemSetAccess (segment_map.h).
//   When CUDA cannot give the window's address (taken in this process) the allocation fails,
//   naming both addresses: the backend never hands out a pointer that would differ elsewhere.
// - Launches: the kernel registry's device versions (cuda_kernels.h, built with --fmad=false),
//   on a stream per worker, asynchronous; synchronize() waits for the bound worker's stream.
// - Splicing: park copies the range into a pinned buffer (asynchronously, on a copy stream,
//   after the worker's queued work) and keeps the physical segments mapped but idle; unpark
//   copies the next rank's bytes back into them at the same addresses. The proxy returns to
//   serving at once; the next rank's stream waits on the copy's event.
// - Checkpoint and restore: streamed through pinned staging buffers, the device copy of one
//   chunk overlapping the sink (CRC, file write) of the previous one.
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "runtime/proxy/backend.h"

namespace orrery::runtime {

// The backend over CUDA device `device` with at most `mem_bytes` of its memory (the scheduler's
// figure for the device; capped at what the device has). Fails with a reason when there is no
// usable device, the ordinal does not exist, or the device lacks virtual memory management.
Result<std::unique_ptr<DeviceBackend>> make_cuda_backend(int device, std::uint64_t mem_bytes,
                                                         const BackendOptions& options = {});

// Ok when CUDA device `device` exists and can be used; else why not ("no CUDA device: ...").
// GPU tests skip on it.
Status cuda_device_usable(int device);

}  // namespace orrery::runtime
