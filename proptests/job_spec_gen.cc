// Random job specs: the Submit decisions of a sequence (generators.h, gen_submit).
#include <cstdint>
#include <limits>
#include <string>

#include "proptests/generators.h"

namespace orrery::proptest {

using spec::EventKind;

namespace {

// Specs at and beyond the input bounds, and specs whose guard arithmetic would leave int64 if
// done naively (before the bounds, each of these was accepted by wrapping around).
void edge_submit(core::Decision& d) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  d.device_type = "A";
  d.tier = static_cast<spec::Tier>(uniform(0, 3));
  d.mem_mib = 1;
  const std::int64_t off = uniform(0, 2);  // 0: at the bound, 1: just past it
  switch (uniform(0, 5)) {
    case 0:  // premium demand + min_devices overflowed at admission
      d.tier = spec::Tier::kPremium;
      d.world = d.min_devices = d.max_devices = kMax - uniform(0, 3);
      break;
    case 1:  // (splice - 1) * mem overflowed in the host memory check
      d.world = 3;
      d.min_devices = d.max_devices = 1;
      d.mem_mib = (std::int64_t{1} << 62) + uniform(0, 3);
      break;
    case 2:  // min_devices * splice overflowed in the spec check: no count in range divides W
      d.world = std::int64_t{5} << 60;
      d.min_devices = (std::int64_t{1} << 60) + 3689348814741910323;  // 2^60 + floor(2^64 / 5)
      d.max_devices = d.min_devices + 1;
      break;
    case 3:  // the world bound; premium so that admission sums it
      d.tier = spec::Tier::kPremium;
      d.world = kRefMaxWorld + off;
      d.min_devices = 1;
      d.max_devices = d.world;
      break;
    default:  // the memory bound, on a placeable job (W = 2, one or two devices)
      d.world = 2;
      d.min_devices = 1;
      d.max_devices = 2;
      d.mem_mib = kRefMaxMemMib + off;
      break;
  }
}

}  // namespace

core::Decision gen_submit(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kSubmit;
  d.name = "job" + std::to_string(m.num_jobs());
  const auto& types = m.type_names;
  if (uniform(0, 20) == 19) {
    edge_submit(d);
  } else if (uniform(0, 100) < 85) {
    // A well-formed spec: W = count * splice with a range around count.
    d.tier = static_cast<spec::Tier>(uniform(0, 3));
    d.device_type = *rc::gen::elementOf(types);
    // Several types, in either order, on a fleet that has several (Retype moves such a job).
    if (types.size() > 1 && uniform(0, 3) == 0) {
      const std::string other = *rc::gen::elementOf(types);
      if (other != d.device_type) d.device_type += "|" + other;
    }
    const std::int64_t count = uniform(1, 5);
    const std::int64_t splice =
        *rc::gen::weightedElement<std::int64_t>({{6, 1}, {6, 2}, {2, 3}, {2, 4}});
    d.world = count * splice;
    d.min_devices = uniform<std::int64_t>(1, count + 1);
    d.max_devices = uniform<std::int64_t>(count, d.world + 1);
    d.mem_mib = uniform(1, 4);
    // All three preemption modes. A signal or requeue program runs one worker per device on
    // exactly its world (the submit guard's rule): mostly so, sometimes not (refused).
    d.mode = *rc::gen::weightedElement<spec::Preemption>(
        {{6, spec::Preemption::kTransparent}, {2, spec::Preemption::kSignal}, {2, spec::Preemption::kRequeue}});
    if (d.mode != spec::Preemption::kTransparent && uniform(0, 5) != 0)
      d.world = d.min_devices = d.max_devices = count;
  } else {
    // Anything, most of it invalid.
    d.tier = static_cast<spec::Tier>(uniform(-1, 4));
    d.device_type = *rc::gen::element<std::string>("A", "B", "C", "", "A|A", "A|C", "A|", "|B");
    d.world = uniform(-1, 20);
    d.min_devices = uniform(-1, 6);
    d.max_devices = uniform(-1, 10);
    d.mem_mib = uniform(-1, 3);
    d.mode = static_cast<spec::Preemption>(uniform(-1, 4));  // unknown modes too
  }
  return d;
}

}  // namespace orrery::proptest
