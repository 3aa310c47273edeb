// The CUDA backend's versions of the kernel registry (runtime/proxy/kernels.h) and of the
// allreduce's rank-ordered sum. Each device kernel performs the same IEEE operations in the same
// order as its host version in kernels.cc, so a job's results are bit-identical on the host
// backend, on a GPU, and in the workload's --reference mode. That holds only when the .cu is
// compiled with --fmad=false and without fast math (IEEE division, no flush-to-zero).
//
// Plain C++17 (no CUDA syntax): the CUDA backend's .cc files include it.
#pragma once

#include <cstdint>
#include <string_view>

#include <cuda_runtime_api.h>

#include "base/result.h"
#include "runtime/proxy/cuda/chunk_hash.h"

namespace orrery::runtime::cuda {

// Launches registry kernel `name` on `stream` (asynchronous). The proxy has already checked
// nargs and every pointer extent (kernels.h KernelDef::extents); returns an error for an
// unknown name, a wrong argument count or a failed launch (cudaGetLastError), never
// dereferences on the host. Output buffers must not overlap input buffers (the host versions
// read and write in one sequence; parallel device versions only match them without overlap).
Status launch_kernel(std::string_view name, const std::uint64_t* args, int nargs,
                     cudaStream_t stream);

// out = in[0] + in[1] + ... element by element in rank order, bit-identical to
// orrery::runtime::sum_in_rank_order. `in` is a HOST array of `ranks` (>= 1) device pointers;
// `out` may be in[0] (in place) but must not overlap any other input.
Status launch_sum_in_rank_order(const float* const* in, int ranks, std::uint64_t count,
                                float* out, cudaStream_t stream);

// out[c] = the hash of chunk c of the n bytes at `dev` (chunk_hash.h: kHashChunk bytes each, the
// last one possibly shorter; equal to chunk_hash_host). `out` is device memory for
// ceil(n / kHashChunk) hashes; `dev` and n are 8-byte aligned. In chunk_hash.cu.
Status launch_chunk_hashes(const void* dev, std::uint64_t n, Hash128* out, cudaStream_t stream);

// Every registry kernel has a device version (for a test that the tables agree).
bool has_kernel(std::string_view name);

}  // namespace orrery::runtime::cuda
