// The simulator's seeded random numbers: xoshiro256** seeded through splitmix64, and the few
// transforms the input generators need (uniform, exponential, normal, weighted choice).
//
// Written out here rather than taken from <random> because the standard distributions
// (std::normal_distribution, std::exponential_distribution ...) are implementation-defined: the same
// seed gives different workloads with another standard library. These give the same sequence of
// integers everywhere; the floating-point transforms use only log, sqrt, cos and exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace orrery::sim {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    // splitmix64 spreads any seed (0 included) over the 256-bit state, never all zero.
    for (auto& s : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe to take the logarithm of.
  double uniform_pos() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // Uniform integer in [lo, hi] (lo <= hi). Multiply-shift: the bias is below 2^-64 per value
  // for the ranges used here, far under anything a simulation could notice.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<unsigned __int128>(static_cast<std::uint64_t>(hi - lo) + 1);
    return lo + static_cast<std::int64_t>((span * next()) >> 64);
  }
  // Exponential with the given rate (mean 1 / rate).
  double exponential(double rate) { return -std::log(uniform_pos()) / rate; }
  // Standard normal, Box-Muller; the second value of each pair is kept for the next call.
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform_pos()));
    const double a = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(a);
    have_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
  double spare_ = 0;
  bool have_spare_ = false;
};

// Weighted choice among a fixed set of outcomes by cumulative weights and binary search
// (O(log n) per draw, n up to millions of tenants).
class WeightedChoice {
 public:
  WeightedChoice() = default;
  // Weights must be finite, >= 0, with a positive sum (the caller checks).
  explicit WeightedChoice(const std::vector<double>& weights) {
    cumulative_.reserve(weights.size());
    double sum = 0;
    for (double w : weights) cumulative_.push_back(sum += w);
    for (auto& c : cumulative_) c /= sum;
    if (!cumulative_.empty()) cumulative_.back() = 1.0;
  }
  int operator()(Rng& rng) const {
    const double u = rng.uniform();
    std::size_t lo = 0, hi = cumulative_.size() - 1;
    while (lo < hi) {  // the first index whose cumulative weight exceeds u
      const std::size_t mid = (lo + hi) / 2;
      if (cumulative_[mid] > u) hi = mid; else lo = mid + 1;
    }
    return static_cast<int>(lo);
  }
  // Probability of outcome i.
  double probability(std::size_t i) const {
    return cumulative_[i] - (i == 0 ? 0.0 : cumulative_[i - 1]);
  }
  std::size_t size() const { return cumulative_.size(); }

 private:
  std::vector<double> cumulative_;
};

}  // namespace orrery::sim
