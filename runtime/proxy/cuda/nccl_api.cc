#include "runtime/proxy/cuda/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace orrery::runtime::cuda {
namespace {

struct Loaded {
  NcclApi api;
  std::string why;  // non-empty: unusable
};

Loaded load() {
  Loaded l;
#if defined(ORRERY_NCCL_LINKED)
  l.api.library = "linked";
#define ORRERY_NCCL_TAKE(f) l.api.f = &::f;
  ORRERY_NCCL_FUNCTIONS(ORRERY_NCCL_TAKE)
#undef ORRERY_NCCL_TAKE
#else
  const char* env = std::getenv("ORRERY_NCCL_LIBRARY");
  l.api.library = env != nullptr && env[0] != '\0' ? env : "libnccl.so.2";
  // Never closed: NCCL keeps threads and communicators alive for the process's lifetime.
  void* h = dlopen(l.api.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    l.why = "NCCL not loadable (" + l.api.library + "): " + (e != nullptr ? e : "dlopen failed");
    return l;
  }
#define ORRERY_NCCL_TAKE(f)                                                  \
  l.api.f = reinterpret_cast<decltype(l.api.f)>(dlsym(h, #f));              \
  if (l.api.f == nullptr) {                                                  \
    l.why = "NCCL (" + l.api.library + ") lacks " #f;                        \
    return l;                                                                \
  }
  ORRERY_NCCL_FUNCTIONS(ORRERY_NCCL_TAKE)
#undef ORRERY_NCCL_TAKE
#endif
  if (ncclResult_t r = l.api.ncclGetVersion(&l.api.version); r != ncclSuccess) {
    l.why = "ncclGetVersion: " + std::string(l.api.ncclGetErrorString(r));
  } else if (l.api.version < 21800) {
    l.why = "NCCL " + std::to_string(l.api.version) + " is older than 2.18";
  }
  return l;
}

}  // namespace

const NcclApi* nccl_api(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.why.empty()) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace orrery::runtime::cuda
