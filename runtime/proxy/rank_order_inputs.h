// Test inputs for the rank-ordered allreduce (collective_test.cc, tcp_collective_test.cc): values
// whose float sum depends on the order in which they are added, and that sum in rank order, the
// result every collective must give bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace orrery::runtime::testing {

// `world` vectors of n values spread over 40 binary orders of magnitude, both signs.
inline std::vector<std::vector<float>> inputs(int world, std::uint64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-20, 20);
  std::vector<std::vector<float>> x(world, std::vector<float>(n));
  for (auto& v : x) {
    for (auto& f : v) f = std::ldexp(mant(rng), ex(rng)) * ((rng() & 1) ? 1.f : -1.f);
  }
  return x;
}

// ((x0 + x1) + x2) + ... element by element, in float32.
inline std::vector<float> rank_order_sum(const std::vector<std::vector<float>>& x) {
  std::vector<float> s = x[0];
  for (std::size_t r = 1; r < x.size(); ++r) {
    for (std::size_t i = 0; i < s.size(); ++i) s[i] += x[r][i];
  }
  return s;
}

}  // namespace orrery::runtime::testing
