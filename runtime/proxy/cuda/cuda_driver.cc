#include "runtime/proxy/cuda/cuda_driver.h"

#include <cuda_runtime_api.h>

namespace orrery::runtime::cuda {
namespace {

// The ABI version asked for every entry point: these functions' signatures have not changed
// since CUDA 10.2, and 12.0 is the oldest driver API the CUDA 13 runtime supports anyway.
constexpr unsigned kAbi = 12000;

template <class F>
Status load_one(const char* name, F* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, kAbi, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == nullptr) {
    return Status::Error(std::string("the CUDA driver has no ") + name + " (" +
                         (e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found") + ")");
  }
  *out = reinterpret_cast<F>(fn);
  return Status::Ok();
}

}  // namespace

Result<Driver> Driver::load() {
  Driver d;
  Status s;
  if (s) s = load_one("cuMemAddressReserve", &d.mem_address_reserve);
  if (s) s = load_one("cuMemAddressFree", &d.mem_address_free);
  if (s) s = load_one("cuMemCreate", &d.mem_create);
  if (s) s = load_one("cuMemRelease", &d.mem_release);
  if (s) s = load_one("cuMemMap", &d.mem_map);
  if (s) s = load_one("cuMemUnmap", &d.mem_unmap);
  if (s) s = load_one("cuMemSetAccess", &d.mem_set_access);
  if (s) s = load_one("cuMemGetAllocationGranularity", &d.mem_get_allocation_granularity);
  if (s) s = load_one("cuDeviceGetAttribute", &d.device_get_attribute);
  if (s) s = load_one("cuGetErrorName", &d.get_error_name);
  if (s) s = load_one("cuDeviceGetUuid", &d.device_get_uuid);
  if (!s) return s;
  return d;
}

std::string Driver::error(const char* call, CUresult r) const {
  const char* name = nullptr;
  if (get_error_name == nullptr || get_error_name(r, &name) != CUDA_SUCCESS || name == nullptr) {
    return std::string(call) + ": CUDA driver error " + std::to_string(static_cast<int>(r));
  }
  return std::string(call) + ": " + name;
}

Status runtime_status(int e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return Status::Error(runtime_error(call, e));
}

std::string runtime_error(const char* call, int e) {
  const auto err = static_cast<cudaError_t>(e);
  return std::string(call) + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
}

}  // namespace orrery::runtime::cuda
