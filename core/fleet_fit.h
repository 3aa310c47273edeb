// Whether a job could ever be placed on a fleet: on every device of it, all nodes Up and nothing
// else running. A spec that fails this is refused at submission, naming the limit it breaks; one
// that passes may still wait (nodes down or drained, devices busy), and then it waits visibly.
// orrery-sim applies the same rule to the jobs it submits (a job no placement could hold is
// counted unschedulable, with its reason), and the gang placer to the jobs it is asked to place
// (kInfeasible rather than kRetryLater).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/fleet.h"
#include "spec/vocabulary.h"

namespace orrery::core {

struct FitRequest {
  int dtype = -1;  // the fleet's device type id
  std::int64_t world = 0, min_devices = 0, max_devices = 0, mem_mib = 0;
  spec::Preemption mode = spec::Preemption::kTransparent;
  // The gang may span regions (GangPlacer::allow_cross_region): the fleet counts as one region.
  bool across_regions = false;
  // A device count that one node of the type's level can hold goes on one node
  // (GangPlacer::set_one_node_gangs): that node's host memory must hold its spliced-out workers.
  bool one_node = false;
};

// The limit a request breaks, the first in this order that no count in range passes.
enum class FitLimit {
  kNone,            // it fits
  kDeviceMemory,    // no device of the type has the memory for a worker
  kSplit,           // the world splits evenly over no device count in range (within the splice limit)
  kRegionDevices,   // every split needs more devices of the type than one region has
  kHostMemory,      // a region has the devices, but its nodes lack host memory for the workers
                    // swapped out
};

// The rule, with what it needs of the fleet computed once: ok when some device count c in
// [min, max] with world = c * splice (splice within the spec's limit, 1 for a signal or requeue
// job) fits the fleet: c devices of the type with room for a worker, within one region (where the
// planners place a gang; anywhere if across_regions), on nodes whose host memory holds the
// spliced-out workers (on one node, with one_node, for a count one node has). (A premium job larger than the premium reserve is admitted spare:
// spec::EffectAdmit.) Otherwise kInvalidArgument with the limit that no count satisfies.
//
// Cost of fits(): O(log levels + splits x regions) where no node's host memory limits the split
// (every unspliced job, and a spliced one whose region's fullest node can hold all its swapped-out
// workers on its smallest host memory); else O(nodes of the region with such devices). The
// fleet's nodes and devices are fixed for its lifetime (design.md), so a FleetFit never goes stale;
// it keeps no reference to the fleet.
class FleetFit {
 public:
  FleetFit() = default;  // fits nothing
  explicit FleetFit(const Fleet& fleet);
  // The limit `r` breaks (kNone: it fits); `why`, if given, says it with the numbers.
  FitLimit limit(const FitRequest& r, std::string* why = nullptr) const;
  // Ok, or kInvalidArgument with limit()'s `why`.
  Status fits(const FitRequest& r) const;

 private:
  // The devices of one type with at least `mem` MiB (the type's distinct memory sizes, each a
  // level: devices of level k have at least the k-th smallest size), per region.
  struct Region {
    std::int64_t total = 0;           // usable devices
    std::int64_t most_on_a_node = 0;  // usable devices on the node with the most
    std::int64_t least_host = 0;      // the smallest host memory of a node with usable devices
    std::vector<std::pair<std::int64_t, std::int64_t>> nodes;  // (usable devices, host memory)
  };
  // The region's devices at `swap` MiB of host memory per device (each node's usable ones, as far
  // as its host memory holds their swapped-out workers), counted until `enough`.
  static std::int64_t host_limited(const Region& reg, std::int64_t swap, std::int64_t enough = INT64_MAX);
  struct Level {
    std::int64_t mem = 0;
    std::vector<Region> regions;
  };
  std::vector<std::string> types_;          // the fleet's device type names
  std::vector<std::vector<Level>> levels_;  // per type, by memory ascending
};

// FleetFit(fleet).fits(r): for one question (the service's, at a submission).
Status fits_fleet(const Fleet& fleet, const FitRequest& r);

}  // namespace orrery::core
