// Named kernels: the functions a worker may launch on its device, by name, with up to
// kMaxKernelArgs 64-bit arguments (device addresses, integers, floats as their bit patterns).
// Each kernel declares the byte extent of every pointer argument as a function of its scalar
// arguments, so the proxy can check each pointer against the calling worker's own allocations
// *before* anything is dereferenced. The host implementations below are also what the workload's
// --reference mode calls on plain host buffers: one code path, hence bit-identical results.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace orrery::runtime {

inline constexpr int kMaxKernelArgs = 16;

struct PointerExtent {
  int arg = 0;                // index of the pointer argument
  std::uint64_t bytes = 0;    // bytes the kernel may touch from it
};

struct KernelDef {
  std::string_view name;
  int nargs = 0;
  // Checks the scalar arguments and says which arguments are pointers and how far they reach.
  Status (*extents)(const std::uint64_t* args, std::vector<PointerExtent>* out) = nullptr;
  // Runs on host memory: pointer arguments are addresses in this process.
  void (*run_host)(const std::uint64_t* args) = nullptr;
};

// The registry (a constant table: no registration order, no global mutable state).
const KernelDef* find_kernel(std::string_view name);
const std::vector<KernelDef>& all_kernels();

// The allreduce's reduction, shared by the proxies' collective and the reference: out = in[0];
// out += in[1]; ... in rank order, element by element, so the sum's rounding never depends on
// placement or arrival order.
void sum_in_rank_order(const float* const* in, int ranks, std::uint64_t count, float* out);

// Float <-> argument bits.
std::uint64_t float_arg(float f);
float arg_float(std::uint64_t a);

// The MLP's shape: params = [W1 (din*hidden) | b1 (hidden) | W2 (hidden*dout) | b2 (dout)].
struct MlpShape {
  std::uint64_t batch = 64, din = 32, hidden = 128, dout = 8;
  std::uint64_t params() const { return din * hidden + hidden + hidden * dout + dout; }
};

}  // namespace orrery::runtime
