// NCCL, reached at run time: orrery-proxy must start, and fall back to the host's collectives,
// on a machine without libnccl (NCCL is 200+ MB and optional for one GPU). The table is resolved
// once, by dlopen of $ORRERY_NCCL_LIBRARY, else libnccl.so.2 on the loader's path. A build that
// links its NCCL in (ORRERY_NCCL_LINKED: the fake NCCL of tests/fake_cuda) takes the linked
// functions instead.
#pragma once

#include <string>

#include <nccl.h>

namespace orrery::runtime::cuda {

#define ORRERY_NCCL_FUNCTIONS(X)                                                                 \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommInitAll) X(ncclCommDestroy) \
  X(ncclCommAbort) X(ncclCommCount) X(ncclCommUserRank) X(ncclCommCuDevice)                      \
  X(ncclGetErrorString) X(ncclGetLastError) X(ncclGroupStart) X(ncclGroupEnd) X(ncclSend)        \
  X(ncclRecv) X(ncclAllGather) X(ncclAllReduce) X(ncclCommGetAsyncError)

struct NcclApi {
#define ORRERY_NCCL_FIELD(f) decltype(&::f) f = nullptr;
  ORRERY_NCCL_FUNCTIONS(ORRERY_NCCL_FIELD)
#undef ORRERY_NCCL_FIELD
  std::string library;  // where it came from ("linked" or the path dlopen was given)
  int version = 0;      // ncclGetVersion's code, e.g. 22809
};

// The table, or nullptr with *why set (library not found, a function missing).
const NcclApi* nccl_api(std::string* why = nullptr);

}  // namespace orrery::runtime::cuda
