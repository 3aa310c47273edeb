// The fake CUDA runtime's kernels: runtime/proxy/cuda/cuda_kernels.h implemented by queueing the
// host versions (kernels.h's registry, chunk_hash.h's chunk_hash_host) on the fake stream, so
// they run when the fake's scheduler gets to them, ordered like a device kernel. Before running,
// each checks what a GPU would fault on: every pointer the kernel declares (KernelDef::extents)
// must be 4-byte aligned and lie in device memory mapped read-write at that moment; otherwise the
// op fails and poisons the fake context (cudaErrorMisalignedAddress, cudaErrorIllegalAddress),
// which the backend must report as broken().
//
// Not emulated: the device kernels' own arithmetic (cuda_kernels_test compares it on a GPU) and
// their requirement that outputs not overlap inputs (the host loops tolerate it).
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/proxy/cuda/chunk_hash.h"
#include "runtime/proxy/cuda/cuda_kernels.h"
#include "runtime/proxy/kernels.h"
#include "tests/fake_cuda/fake_cuda.h"

namespace orrery::runtime::cuda {
namespace {

// What a GPU would say about one pointer argument when the kernel runs.
cudaError_t check_pointer(std::string_view kernel, int arg, std::uint64_t p, std::uint64_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (p % 4 != 0) {
    std::fprintf(stderr, "fake_cuda: kernel %.*s: argument %d (0x%llx) is not 4-byte aligned\n",
                 static_cast<int>(kernel.size()), kernel.data(), arg,
                 static_cast<unsigned long long>(p));
    return cudaErrorMisalignedAddress;
  }
  if (!fake_cuda_device_accessible(reinterpret_cast<const void*>(p), bytes)) {
    std::fprintf(stderr,
                 "fake_cuda: kernel %.*s: argument %d [0x%llx, +%llu) is not device memory "
                 "mapped read-write\n",
                 static_cast<int>(kernel.size()), kernel.data(), arg,
                 static_cast<unsigned long long>(p), static_cast<unsigned long long>(bytes));
    return cudaErrorIllegalAddress;
  }
  return cudaSuccess;
}

// As in cuda_kernels.cu: a launch reports the runtime's last error.
Status launched(std::string_view name) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error("kernel " + std::string(name) + ": launch failed: " +
                       cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

}  // namespace

Status launch_kernel(std::string_view name, const std::uint64_t* args, int nargs,
                     cudaStream_t stream) {
  const KernelDef* k = find_kernel(name);
  if (k == nullptr) return Status::Error("no device kernel named '" + std::string(name) + "'");
  if (nargs != k->nargs) {
    return Status::Error("kernel " + std::string(name) + " takes " + std::to_string(k->nargs) +
                         " arguments, got " + std::to_string(nargs));
  }
  std::vector<std::uint64_t> a(args, args + nargs);  // the launch copies its arguments
  std::vector<PointerExtent> ext;
  // The proxy has checked them already; scalars it would refuse are refused here at launch
  // rather than guessed at (a stricter fake, not a GPU behavior).
  if (Status s = k->extents(a.data(), &ext); !s) {
    return Status::Error("kernel " + std::string(name) + ": " + s.reason());
  }
  (void)fake_cuda_enqueue_checked(stream, [k, a = std::move(a), ext = std::move(ext)] {
    for (const PointerExtent& e : ext) {
      if (cudaError_t err = check_pointer(k->name, e.arg, a[e.arg], e.bytes); err != cudaSuccess) {
        return err;
      }
    }
    k->run_host(a.data());
    return cudaSuccess;
  });
  return launched(name);
}

Status launch_sum_in_rank_order(const float* const* in, int ranks, std::uint64_t count,
                                float* out, cudaStream_t stream) {
  if (ranks < 1) return Status::Error("sum_in_rank_order: " + std::to_string(ranks) + " ranks");
  if (count == 0) return Status::Ok();
  std::vector<const float*> v(in, in + ranks);  // `in` is a host array, read at launch
  (void)fake_cuda_enqueue_checked(stream, [v = std::move(v), ranks, count, out] {
    for (int r = 0; r < ranks; ++r) {
      const auto p = reinterpret_cast<std::uint64_t>(v[r]);
      if (cudaError_t e = check_pointer("sum_in_rank_order", r, p, count * 4); e != cudaSuccess) {
        return e;
      }
    }
    const auto o = reinterpret_cast<std::uint64_t>(out);
    if (cudaError_t e = check_pointer("sum_in_rank_order", ranks, o, count * 4);
        e != cudaSuccess) {
      return e;
    }
    sum_in_rank_order(v.data(), ranks, count, out);
    return cudaSuccess;
  });
  return launched("sum_in_rank_order");
}

// The device hash of splice dedup: chunk_hash_host per chunk, which is what chunk_hash.cu is
// tested to compute (cuda_kernels_test, on a GPU).
Status launch_chunk_hashes(const void* dev, std::uint64_t n, Hash128* out, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  if (n % 8 != 0 || reinterpret_cast<std::uintptr_t>(dev) % 8 != 0) {
    return Status::Error("chunk_hashes: the range must be 8-byte aligned and sized");
  }
  const auto base = reinterpret_cast<std::uint64_t>(dev);
  (void)fake_cuda_enqueue_checked(stream, [base, n, out] {
    const std::uint64_t chunks = (n + kHashChunk - 1) / kHashChunk;
    if (cudaError_t e = check_pointer("chunk_hashes", 0, base, n); e != cudaSuccess) return e;
    const auto o = reinterpret_cast<std::uint64_t>(out);
    if (cudaError_t e = check_pointer("chunk_hashes", 2, o, chunks * sizeof(Hash128));
        e != cudaSuccess) {
      return e;
    }
    for (std::uint64_t c = 0; c < chunks; ++c) {
      const std::uint64_t off = c * kHashChunk;
      out[c] = chunk_hash_host(reinterpret_cast<const unsigned char*>(base) + off,
                               n - off < kHashChunk ? n - off : kHashChunk);
    }
    return cudaSuccess;
  });
  return launched("chunk_hashes");
}

bool has_kernel(std::string_view name) { return find_kernel(name) != nullptr; }

}  // namespace orrery::runtime::cuda
