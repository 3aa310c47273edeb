// Three weights given on orrery-sim's command line as "A:B:C" (non-negative integers up to 1e9,
// not all zero; only their ratios matter): the preemption modes of --modes, the tiers of
// --tier-weights.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace orrery::sim {

// `option` and `form` name them in errors, e.g. "--modes" and "transparent:signal:requeue", with
// `example` ("60:30:10").
inline Result<std::array<std::uint32_t, 3>> parse_weights3(std::string_view text, std::string_view option,
                                                            std::string_view form, std::string_view example) {
  std::array<std::uint32_t, 3> w{};
  const std::string head = std::string(option) + " \"" + std::string(text) + "\": ";
  const std::string want = std::string(form) + " (e.g. " + std::string(example) + ")";
  std::size_t i = 0;
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < w.size(); ++k) {
    const std::size_t start = i;
    std::uint64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= 1'000'000'000)
      v = v * 10 + static_cast<std::uint64_t>(text[i++] - '0');
    if (i == start || v > 1'000'000'000)
      return Status::Error(head + "want three weights " + std::string(form) + ", each an integer up to 1e9 (e.g. " +
                           std::string(example) + ")");
    w[k] = static_cast<std::uint32_t>(v);
    sum += v;
    if (k + 1 < w.size()) {
      if (i >= text.size() || text[i] != ':') return Status::Error(head + "want " + want);
      ++i;
    }
  }
  if (i != text.size()) return Status::Error(head + "trailing characters");
  if (sum == 0) return Status::Error(head + "the weights are all zero");
  return w;
}

}  // namespace orrery::sim
