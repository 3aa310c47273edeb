// Gang placement policy: proposes a device set and splice factor for a job. An untrusted planner:
// it reads the core's state and proposes; the core checks the spec guard before committing.
//
// propose_gang() is the topology-aware placer (core/policy/gang_placer.h: one node, else one
// cluster, else one region; best fit; reservations; host memory; the proposal checked against the
// spec guard) run once on the state as it is: it builds the placer's index, O(devices), per call.
// Planners that place often keep one GangPlacer instead, which follows the core's commits.
//
// propose_gang_scan() is the first policy, kept as the baseline the placer is measured and tested
// against (bench/placement_bench.cc, tests/gang_placer_test.cc): it scans every device per call
// and picks the largest device count c in [min_devices, min(max_devices, want)] that divides W
// with W / c <= kSpliceLimit and for which enough free devices of the job's type exist, taking
// devices node by node from the node with the most free ones, whatever the cluster or region.
// Devices reserved for another job are not free to it, unless it outranks that job; devices
// reserved for this job are. Only devices on Up nodes are taken; devices a resize keeps stay
// wherever they are. It does not check device or host memory.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "core/decision.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

// Why a proposal is not kOk: text of its own, or one of the placer's fixed texts, by reference.
// A walk over a long queue asks the placer again and again about jobs it remembers cannot fit
// (GangPlacer::missed_again); building that answer's text each time was 5 % of a synthetic run
// (docs/performance.md, "The planner's cost after backfill").
class Why {
 public:
  Why() = default;
  Why(std::string text) : own_(std::move(text)) {}  // NOLINT: implicit, as the string it was
  Why(const char* text) : own_(text) {}              // NOLINT
  // `text` must outlive every copy (a static).
  static Why fixed(const std::string& text) {
    Why w;
    w.fixed_ = &text;
    return w;
  }
  const std::string& str() const { return fixed_ != nullptr ? *fixed_ : own_; }
  operator const std::string&() const { return str(); }  // NOLINT
  bool empty() const { return str().empty(); }
  friend bool operator==(const Why& a, std::string_view b) { return a.str() == b; }
  friend std::string operator+(std::string a, const Why& b) { return a += b.str(); }
  friend std::ostream& operator<<(std::ostream& os, const Why& w) { return os << w.str(); }

 private:
  const std::string* fixed_ = nullptr;
  std::string own_;
};

struct Proposal {
  enum class Kind { kOk, kRetryLater, kInfeasible } kind = Kind::kOk;
  Decision decision;  // kOk
  Why why;            // otherwise
};

// `event` is Place, Resume, Migrate or ResizeUp; `want` caps the device count (-1: max_devices).
// For Migrate the job's own devices are not reused; for ResizeUp they are kept.
Proposal propose_gang(const SchedulerCore& core, int job, spec::EventKind event, int want = -1);
Proposal propose_gang_scan(const SchedulerCore& core, int job, spec::EventKind event,
                           int want = -1);

}  // namespace orrery::core::policy
