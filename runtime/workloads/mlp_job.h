// The MLP training job: deterministic data-parallel SGD on a small MLP with synthetic data drawn
// from (seed, rank, step). Run through the worker API (run_mlp_worker) it uses only the proxy's
// kernels and allreduce; run_mlp_reference computes the same training in-process with the same
// kernel code and the same rank-ordered reduction, so both give bit-identical weights whatever
// the placement, splice factor, device count or checkpoint/restore in between.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/kernels.h"
#include "runtime/worker/worker.h"

namespace orrery::runtime {

struct MlpConfig {
  MlpShape shape;
  std::int64_t steps = 100;
  std::uint64_t seed = 1;
  float lr = 0.05f;
  int world = 1;           // --reference only (a worker takes it from its environment)
  bool reference = false;
  std::int64_t step_delay_us = 0;  // host-side pause per step (tests: a window to act in)
};

struct MlpResult {
  std::uint64_t digest = 0;  // FNV-1a 64 of the final parameters' bytes
  float loss = 0;            // this rank's loss on its last batch (reference: rank 0's)
  std::int64_t steps_done = 0;
  bool stopped = false;      // stopped on request at steps_done, after its checkpoint
  bool restored = false;
  std::int64_t restored_from = -1;
};

// Parses --steps= --seed= --batch= --din= --hidden= --dout= --lr= --world= --reference
// --step-delay-us=.
Result<MlpConfig> parse_mlp_args(const std::vector<std::string>& args);

Result<MlpResult> run_mlp_worker(Worker& w, const MlpConfig& cfg);
MlpResult run_mlp_reference(const MlpConfig& cfg);

std::uint64_t fnv1a64(const void* data, std::size_t n);
std::string mlp_result_line(const MlpResult& r, int rank, int world);

}  // namespace orrery::runtime
