// Whole-state comparison of two concrete clusters, for the property tests: every shape and fleet
// value, every per-device variable, every counter, every job variable and held set. Written out
// here rather than through spec::for_each_state_var, so that a variable the spec's visitor forgot
// would still be compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "spec/model.h"

namespace orrery::proptest {

using Cluster = spec::ClusterVars<spec::Concrete>;

// JobVars is 21 integers and two device sets (held, target) today; a new member must be added to
// the comparison below (and to the reference checks) before this compiles again.
static_assert(sizeof(spec::JobVars<spec::Concrete>) ==
                  21 * sizeof(std::int64_t) + 2 * sizeof(spec::Concrete::DevSet),
              "spec::JobVars changed: compare its new members in cluster_diff()");

inline std::string show_devset(const spec::Concrete::DevSet& s) {
  std::string out = "{";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "}";
}

// The differences between a and b, one per line ("" when they are equal).
inline std::string cluster_diff(const Cluster& a, const Cluster& b) {
  std::ostringstream o;
  auto vec = [&](const char* name, const auto& x, const auto& y) {
    if (x.size() != y.size()) {
      o << "  " << name << ": " << x.size() << " vs " << y.size() << " elements\n";
      return;
    }
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i]) o << "  " << name << "[" << i << "]: " << x[i] << " vs " << y[i] << "\n";
  };
  vec("group_first", a.group_first, b.group_first);
  vec("group_node", a.group_node, b.group_node);
  if (a.nodes != b.nodes) o << "  nodes: " << a.nodes << " vs " << b.nodes << "\n";
  vec("group_type", a.group_type, b.group_type);
  vec("group_mem", a.group_mem, b.group_mem);
  vec("node_devs", a.node_devs, b.node_devs);
  vec("host_mem", a.host_mem, b.host_mem);
  vec("premium_reserve", a.premium_reserve, b.premium_reserve);
  vec("owner", a.owner, b.owner);
  vec("owner_epoch", a.owner_epoch, b.owner_epoch);
  vec("resv_for", a.resv_for, b.resv_for);
  vec("resv_gen", a.resv_gen, b.resv_gen);
  vec("node_held", a.node_held, b.node_held);
  vec("node_swap", a.node_swap, b.node_swap);
  vec("premium_admitted", a.premium_admitted, b.premium_admitted);
  if (a.num_jobs() != b.num_jobs()) {
    o << "  jobs: " << a.num_jobs() << " vs " << b.num_jobs() << "\n";
    return o.str();
  }
  constexpr auto fields = spec::job_fields<spec::Concrete>();
  for (int j = 0; j < a.num_jobs(); ++j) {
    for (const auto& [name, member] : fields)
      if (a.jobs[j].*member != b.jobs[j].*member)
        o << "  j" << j << "." << name << ": " << a.jobs[j].*member << " vs " << b.jobs[j].*member
          << "\n";
    if (a.jobs[j].held != b.jobs[j].held)
      o << "  j" << j << ".held: " << show_devset(a.jobs[j].held) << " vs "
        << show_devset(b.jobs[j].held) << "\n";
    if (a.jobs[j].target != b.jobs[j].target)
      o << "  j" << j << ".target: " << show_devset(a.jobs[j].target) << " vs "
        << show_devset(b.jobs[j].target) << "\n";
  }
  return o.str();
}

// Device dev carries a live reservation, and for whom (-1: none), read off the core's raw fields
// by the rule's prose: made for a job that still waits (Queued or Suspended) or is moving
// (Migrating or Resizing: its target's devices), under the reservation generation that job is at
// now. Deliberately not spec::reserved, so that a mistake there shows as a disagreement with the
// reference model.
inline int live_reservation(const Cluster& c, int dev) {
  const auto r = c.resv_for[static_cast<std::size_t>(dev)];
  if (r < 0 || r >= c.num_jobs()) return -1;
  const auto& job = c.jobs[static_cast<std::size_t>(r)];
  const auto st = static_cast<spec::JobState>(job.state);
  const bool reserving = st == spec::JobState::kQueued || st == spec::JobState::kSuspended ||
                         st == spec::JobState::kMigrating || st == spec::JobState::kResizing;
  return reserving && c.resv_gen[static_cast<std::size_t>(dev)] == job.resv_gen
             ? static_cast<int>(r)
             : -1;
}

}  // namespace orrery::proptest
