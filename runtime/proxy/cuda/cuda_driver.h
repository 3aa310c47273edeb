// The few CUDA driver API functions the backend needs (virtual memory management), reached
// through the runtime's cudaGetDriverEntryPointByVersion instead of linking libcuda: a binary
// that links libcuda does not even start on a machine without the driver, and orrery-proxy (with
// its host backend) must run on every machine, GPU or not.
#pragma once

#include <cuda.h>

#include <string>

#include "base/result.h"

namespace orrery::runtime::cuda {

struct Driver {
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDeviceGetUuid) device_get_uuid = nullptr;  // the v2 entry point

  // Loads every entry point (the runtime must have a device set); names the one missing.
  static Result<Driver> load();
  // "cuMemMap: CUDA_ERROR_OUT_OF_MEMORY" and the like.
  std::string error(const char* call, CUresult r) const;
};

// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)" and the like, for runtime API errors.
std::string runtime_error(const char* call, int cuda_error);
// Ok for cudaSuccess; else runtime_error's reason, with CUDA's last error cleared (so that a
// later call does not report this one again).
Status runtime_status(int cuda_error, const char* call);

}  // namespace orrery::runtime::cuda
