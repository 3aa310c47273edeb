// Preemption modes for simulated jobs (spec::Preemption): traces and synthetic workloads say
// nothing about how a job's program is preempted, so the simulator draws a mode per job from
// weights (`orrery-sim --modes transparent:signal:requeue`, e.g. 60:30:10; default: every job
// transparent). The draw is a hash of the seed and the job's index in the workload: the same job
// gets the same mode under every policy (common random numbers), and no other random stream of
// the simulator moves (node failures keep their own), so a run without --modes is the run it was
// before modes existed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "runtime/sim/weights.h"
#include "spec/vocabulary.h"

namespace orrery::sim {

// Weights of transparent, signal and requeue; only their ratios matter.
using ModeWeights = std::array<std::uint32_t, spec::kNumPreemptions>;
inline constexpr ModeWeights kAllTransparent = {1, 0, 0};

// "T:S:R" (three non-negative integers, not all zero), e.g. "60:30:10" or "0:0:1".
inline Result<ModeWeights> parse_mode_weights(std::string_view text) {
  return parse_weights3(text, "--modes", "transparent:signal:requeue", "60:30:10");
}

// The mode of the workload's job `index` under `weights` and `seed`.
inline spec::Preemption draw_mode(const ModeWeights& weights, std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t total = std::uint64_t{weights[0]} + weights[1] + weights[2];
  if (total == 0 || total == weights[0]) return spec::Preemption::kTransparent;  // no draw at all
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ (index + 0x632be59bd9b4e019ull);  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  std::uint64_t pick = x % total;
  for (int m = 0; m < spec::kNumPreemptions; ++m) {
    if (pick < weights[static_cast<std::size_t>(m)]) return static_cast<spec::Preemption>(m);
    pick -= weights[static_cast<std::size_t>(m)];
  }
  return spec::Preemption::kTransparent;  // not reached
}

}  // namespace orrery::sim
