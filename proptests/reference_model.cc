#include "proptests/reference_model.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace orrery::proptest {

using spec::EventKind;
using spec::JobState;

std::string FleetDesc::to_text() const {
  std::ostringstream out;
  out << "premium_reserve " << premium_reserve << "\nregion r0\n";
  std::string cluster;
  for (const auto& n : nodes) {
    if (n.cluster != cluster) {
      cluster = n.cluster;
      out << "cluster " << cluster << "\n";
    }
    out << "node " << n.name << " host_mem_mib=" << n.host_mem_mib << "\n";
    for (const auto& g : n.groups)
      out << "devices " << g.type << " count=" << g.count << " mem_mib=" << g.mem_mib << "\n";
  }
  return out.str();
}

const std::vector<FleetDesc>& test_fleets() {
  static const std::vector<FleetDesc> fleets = {
      // Three nodes, two types, node n2 without host memory (no splicing there at all).
      {3,
       {{"n0", "c0", 6, {{"A", 4}}},
        {"n1", "c0", 3, {{"A", 2, 3}, {"B", 2}}},
        {"n2", "c1", 0, {{"B", 2}}}}},
      // Two nodes of three devices of one type.
      {2, {{"n0", "c0", 4, {{"A", 3}}}, {"n1", "c0", 8, {{"A", 3}}}}},
      // Three small nodes of two devices, generous memory on one, a bigger premium reserve.
      {4, {{"n0", "c0", 2, {{"A", 2}}}, {"n1", "c0", 12, {{"A", 2, 2}}}, {"n2", "c0", 1, {{"A", 2}}}}},
  };
  return fleets;
}

RefModel RefModel::from_fleet(int fleet_index, std::int64_t start_ms) {
  const FleetDesc& f = test_fleets().at(static_cast<std::size_t>(fleet_index));
  RefModel m;
  m.fleet_index = fleet_index;
  m.reserve = f.premium_reserve;
  m.now_ms = start_ms;
  for (int n = 0; n < static_cast<int>(f.nodes.size()); ++n) {
    m.host_mem.push_back(f.nodes[n].host_mem_mib);
    for (const auto& g : f.nodes[n].groups) {
      int type = -1;
      for (int t = 0; t < static_cast<int>(m.type_names.size()); ++t)
        if (m.type_names[t] == g.type) type = t;
      if (type < 0) {
        type = static_cast<int>(m.type_names.size());
        m.type_names.push_back(g.type);
      }
      for (int i = 0; i < g.count; ++i) {
        m.dev_type.push_back(type);
        m.dev_mem.push_back(g.mem_mib);
        m.dev_node.push_back(n);
      }
    }
  }
  m.reserved_for.assign(m.dev_type.size(), -1);
  // Every node is Up, as core::bring_up_all_nodes() leaves the core under test: two node decisions
  // (Register, Ready) per node, committed before the sequence starts.
  m.committed = 2 * f.nodes.size();
  return m;
}

int RefModel::holder_of(int dev) const {
  for (int j = 0; j < num_jobs(); ++j)
    if (jobs[j].devices.count(dev)) return j;
  return -1;
}

std::int64_t RefModel::node_held(int node) const {
  std::int64_t n = 0;
  for (const auto& job : jobs)
    for (int dev : job.devices) n += dev_node[dev] == node ? 1 : 0;
  return n;
}

// Each held device of a spliced job parks (splice - 1) workers' device memory in its node's host
// memory.
std::int64_t RefModel::node_swap(int node) const {
  std::int64_t mib = 0;
  for (const auto& job : jobs)
    for (int dev : job.devices)
      if (dev_node[dev] == node) mib += (job.splice - 1) * job.mem;
  return mib;
}

std::int64_t RefModel::premium_admitted() const {
  std::int64_t n = 0;
  for (const auto& job : jobs)
    if (job.tier == 0 && ref_admitted(job.state) && !job.spare) n += job.min_dev;
  return n;
}

bool ref_holding(JobState s) {
  switch (s) {
    case JobState::kPlaced:
    case JobState::kRunning:
    case JobState::kCheckpointing:
    case JobState::kMigrating:
    case JobState::kResizing:
    case JobState::kRestoring:
      return true;
    default:
      return false;
  }
}

bool ref_waiting(JobState s) { return s == JobState::kQueued || s == JobState::kSuspended; }

bool ref_moving(JobState s) { return s == JobState::kMigrating || s == JobState::kResizing; }

// A launch (Placed), a cut (Checkpointing, Migrating, Resizing) or a restore (Restoring).
bool ref_in_flight(JobState s) {
  return s == JobState::kPlaced || s == JobState::kCheckpointing || ref_moving(s) ||
         s == JobState::kRestoring;
}

bool ref_admitted(JobState s) {
  return s == JobState::kQueued || s == JobState::kSuspended || ref_holding(s);
}

std::vector<std::int64_t> ref_feasible_counts(const RefJob& job) {
  std::vector<std::int64_t> out;
  if (job.world < 1) return out;
  // Enumerate splice factors (at most kRefSpliceLimit), largest device count first.
  for (std::int64_t s = 1; s <= kRefSpliceLimit; ++s) {
    if (job.world % s != 0) continue;
    std::int64_t c = job.world / s;
    if (job.min_dev <= c && c <= job.max_dev) out.push_back(c);
  }
  return out;
}

std::string describe_job(const RefJob& j) {
  std::ostringstream o;
  o << spec::state_name(j.state) << " tier=" << j.tier << " dtype=" << j.dtype << " W=" << j.world
    << " [" << j.min_dev << "," << j.max_dev << "] mem=" << j.mem << " devices={";
  bool first = true;
  for (int d : j.devices) {
    o << (first ? "" : ",") << d;
    first = false;
  }
  o << "} x" << j.splice << " epoch=" << j.epoch << " progress=" << j.progress << " ckpt=" << j.ckpt
    << " failures=" << j.failures << " faults=" << j.faults << " attained=" << j.attained
    << " mode=" << j.mode << " hold=" << j.hold << " spare=" << j.spare;
  if (j.ben >= 0) o << " ben=" << j.ben;
  if (!j.target.empty() || j.tsplice != 0) {
    o << " target={";
    first = true;
    for (int d : j.target) {
      o << (first ? "" : ",") << d;
      first = false;
    }
    o << "} x" << j.tsplice;
  }
  return o.str();
}

// May waiting job `b` take resources from job `v`? Strictly better tier; or the same tier, and of
// two premium jobs one within the reserve and one spare, the one within while it leads the other by
// at most half of kRefReserveLeadGpuMs, the spare one once that lead is more than all of it; else
// (the same standing) strictly less service received.
bool ref_favoured(const RefModel& m, std::int64_t b, int v) {
  if (b < 0 || b >= m.num_jobs() || b == v) return false;
  const RefJob& ben = m.jobs[static_cast<std::size_t>(b)];
  const RefJob& vic = m.jobs[static_cast<std::size_t>(v)];
  if (!ref_waiting(ben.state)) return false;
  if (ben.dtype != vic.dtype) return false;  // it could not use the victim's devices
  if (ben.tier != vic.tier) return ben.tier < vic.tier;
  if (ben.spare != vic.spare) {
    const std::int64_t within_lead = ben.spare ? vic.attained - ben.attained : ben.attained - vic.attained;
    return ben.spare ? within_lead > kRefReserveLeadGpuMs : within_lead <= kRefReserveLeadGpuMs / 2;
  }
  return ben.attained < vic.attained;
}

namespace {

// Does job j's gang fit on `sel` with `splice` workers per device, given everybody else?
bool gang_fits(const RefModel& m, int j, const std::set<int>& sel, std::int64_t splice,
               std::string& why) {
  const RefJob& job = m.jobs[j];
  const auto count = static_cast<std::int64_t>(sel.size());
  if (count < job.min_dev || count > job.max_dev) return why = "device count out of range", false;
  if (splice < 1 || splice > kRefSpliceLimit) return why = "splice out of [1, limit]", false;
  if (count * splice != job.world) return why = "devices * splice != world", false;
  if (!job.transparent() && splice != 1) return why = "a signal or requeue job is not spliced", false;
  for (int dev : sel) {
    if (m.dev_type[dev] != job.dtype) return why = "wrong device type", false;
    if (m.dev_mem[dev] < job.mem) return why = "device memory too small for a worker", false;
  }
  for (int dev : sel) {
    int h = m.holder_of(dev);
    if (h >= 0 && h != j) return why = "device held by another job", false;
  }
  // A device freed for a waiting job (by a shrink or a preemption in its favour) is kept for it
  // until it is placed or gives the reservation up: nobody else may take it meanwhile — except a
  // job that would itself be favoured over it (a reservation never keeps a higher tier waiting).
  for (int dev : sel) {
    const int r = m.reserved_for[dev];
    if (r >= 0 && r != j && !ref_favoured(m, j, r)) {
      why = "device reserved for another job";
      return false;
    }
  }
  // Device capacity, node by node: the devices the other jobs hold there plus the selected ones.
  for (int n = 0; n < m.num_nodes(); ++n) {
    std::int64_t devs = 0, used = 0;
    for (int dev = 0; dev < m.num_devices(); ++dev) {
      if (m.dev_node[dev] != n) continue;
      ++devs;
      const int h = m.holder_of(dev);
      used += (h >= 0 && h != j) || sel.count(dev) ? 1 : 0;
    }
    if (used > devs) return why = "node capacity exceeded on node " + std::to_string(n), false;
  }
  // Host memory, node by node: each held device of a spliced job parks (splice - 1) workers'
  // device memory in its node's host memory.
  // Sums in 128 bits: the model states the rule on true integers, whatever the inputs' size.
  for (int n = 0; n < m.num_nodes(); ++n) {
    __int128 use = 0;
    for (int k = 0; k < m.num_jobs(); ++k) {
      if (k == j) continue;
      for (int dev : m.jobs[k].devices)
        if (m.dev_node[dev] == n)
          use += static_cast<__int128>(m.jobs[k].splice - 1) * m.jobs[k].mem;
    }
    for (int dev : sel)
      if (m.dev_node[dev] == n) use += static_cast<__int128>(splice - 1) * job.mem;
    if (use > m.host_mem[n])
      return why = "host memory exceeded on node " + std::to_string(n), false;
  }
  return true;
}

}  // namespace

bool ref_gang_fits(const RefModel& m, int j, const std::set<int>& sel, std::int64_t splice) {
  std::string why;
  return gang_fits(m, j, sel, splice, why);
}

namespace {

// The id of a device type name, -1 when the fleet has none.
int type_named(const RefModel& m, const std::string& name) {
  for (int t = 0; t < static_cast<int>(m.type_names.size()); ++t)
    if (m.type_names[t] == name) return t;
  return -1;
}

bool valid_spec(const RefModel& m, const core::Decision& d, int& type, std::vector<int>& types, std::string& why) {
  // One type, or several separated by '|': each known, none twice; the first is the job's type.
  types.clear();
  std::string name;
  for (std::size_t i = 0; i <= d.device_type.size(); ++i) {
    if (i < d.device_type.size() && d.device_type[i] != '|') {
      name += d.device_type[i];
      continue;
    }
    const int t = type_named(m, name);
    if (t < 0) return why = "unknown device type", false;
    for (int u : types)
      if (u == t) return why = "device type named twice", false;
    types.push_back(t);
    name.clear();
  }
  type = types.front();
  if (types.size() == 1) types.clear();
  auto tier = static_cast<std::int64_t>(d.tier);
  if (tier < 0 || tier >= kRefNumTiers) return why = "unknown tier", false;
  if (!(1 <= d.min_devices && d.min_devices <= d.max_devices && d.max_devices <= d.world))
    return why = "bad device range", false;
  if (d.world > kRefMaxWorld) return why = "world too large", false;
  if (d.mem_mib < 1 || d.mem_mib > kRefMaxMemMib) return why = "bad memory", false;
  RefJob probe;
  probe.world = d.world;
  probe.min_dev = d.min_devices;
  probe.max_dev = d.max_devices;
  if (ref_feasible_counts(probe).empty()) return why = "world does not split", false;
  const auto mode = static_cast<std::int64_t>(d.mode);
  if (mode < 0 || mode > 2) return why = "unknown preemption mode", false;
  // Signal and requeue programs run one worker per device, on exactly their world.
  if (d.mode != spec::Preemption::kTransparent && (d.min_devices != d.world || d.max_devices != d.world))
    return why = "a signal or requeue job needs min_devices == max_devices == world", false;
  return true;
}

// Every device job v holds has device memory for one of job b's workers: what it frees is of use
// to b.
bool fits_devices(const RefModel& m, std::int64_t b, int v) {
  if (b < 0 || b >= m.num_jobs()) return false;
  for (int dev : m.jobs[v].devices)
    if (m.dev_mem[dev] < m.jobs[static_cast<std::size_t>(b)].mem) return false;
  return true;
}

// Job j gives every device back; those it gives up for `for_job` stay reserved for that job
// when it is waiting (for_job < 0: for nobody). Returns how many were reserved.
int release(RefModel& m, int j, std::int64_t for_job = -1) {
  RefJob& job = m.jobs[j];
  const bool reserve = for_job >= 0 && for_job < m.num_jobs() &&
                       ref_waiting(m.jobs[static_cast<std::size_t>(for_job)].state);
  int made = 0;
  for (int dev : job.devices)
    if (reserve) {
      m.reserved_for[dev] = static_cast<int>(for_job);
      ++made;
    }
  job.devices.clear();
  job.splice = 0;
  return made;
}

// Job j now holds exactly `sel`; a reservation on a device it takes ends there (the guard has
// made sure it was j's own, or one for a job j is favoured over: those are counted in
// `overridden`). Returns how many of j's own reservations it consumed.
int take(RefModel& m, int j, const std::set<int>& sel, std::int64_t splice,
         int* overridden = nullptr) {
  int consumed = 0;
  for (int dev : sel) {
    consumed += m.reserved_for[dev] == j ? 1 : 0;
    if (overridden && m.reserved_for[dev] >= 0 && m.reserved_for[dev] != j) ++*overridden;
    m.reserved_for[dev] = -1;
  }
  m.jobs[j].devices = sel;
  m.jobs[j].splice = splice;
  return consumed;
}

// Ends every reservation made for job j; returns how many there were.
int void_reservations(RefModel& m, int j) {
  int n = 0;
  for (auto& r : m.reserved_for)
    if (r == j) {
      r = -1;
      ++n;
    }
  return n;
}

// Job j (running) decides a move to `sel` with `splice` workers per device: it keeps its devices
// and its incarnation, remembers where it goes (and, for a shrink, whom the devices it gives up
// are for), and the target devices it does not hold are reserved for it. Whatever was reserved
// for it before ends (it is running: nothing should be). Returns how many devices it reserved;
// adds the ended reservations to `voided`.
int plan_move(RefModel& m, int j, const std::set<int>& sel, std::int64_t splice,
              std::int64_t ben, int& voided) {
  voided += void_reservations(m, j);
  RefJob& job = m.jobs[j];
  int made = 0;
  for (int dev : sel)
    if (!job.devices.count(dev)) {
      m.reserved_for[dev] = j;
      ++made;
    }
  job.target = sel;
  job.tsplice = splice;
  job.ben = ben;
  return made;
}

// The move in flight (target, its splice) and the beneficiary are forgotten.
void forget_move(RefJob& job) {
  job.target.clear();
  job.tsplice = 0;
  job.ben = -1;
}

// A cut at `step` is stored: the job's checkpoint. A requeue job keeps nothing: its checkpoint is
// its start (step 0) and its progress goes back there.
void store_cut(RefJob& job, std::int64_t step) {
  job.ckpt = job.requeue() ? 0 : step;
  if (job.requeue()) job.progress = 0;
}

// Progress goes back to the last committed checkpoint, or to the start without one.
void roll_back(RefJob& job) { job.progress = job.ckpt >= 0 ? job.ckpt : 0; }

}  // namespace

Prediction predict(RefModel& m, const core::Decision& d) {
  Prediction p;
  auto reject = [&](std::string why) {
    ++m.rejected;
    p.accepted = false;
    p.why = std::move(why);
    return p;
  };

  // Who decided it comes first: a wrong origin is rejected before the job or the parameters are
  // looked at.
  if (!ref_may_decide(d.origin, d.event)) {
    p.wrong_origin = true;
    return reject("wrong origin (" + std::string(spec::origin_name(d.origin)) + ")");
  }

  // The device list must name distinct devices of the fleet, whatever the event.
  std::set<int> sel;
  for (auto dev : d.devices) {
    if (dev < 0 || dev >= m.num_devices()) return reject("device not in fleet");
    if (!sel.insert(static_cast<int>(dev)).second) return reject("device listed twice");
  }

  if (d.event == EventKind::kSubmit) {
    int type = -1;
    std::vector<int> types;
    std::string why;
    if (!valid_spec(m, d, type, types, why)) return reject(why);
    RefJob job;
    job.types = types;
    job.state = JobState::kSubmitted;
    job.tier = static_cast<std::int64_t>(d.tier);
    job.dtype = type;
    job.world = d.world;
    job.min_dev = d.min_devices;
    job.max_dev = d.max_devices;
    job.mem = d.mem_mib;
    job.mode = static_cast<std::int64_t>(d.mode);
    m.jobs.push_back(job);
    ++m.committed;
    p.accepted = true;
    p.job = m.num_jobs() - 1;
    p.from = JobState::kNew;
    p.to = JobState::kSubmitted;
    return p;
  }

  if (d.job < 0 || d.job >= m.num_jobs()) return reject("no such job");
  const int j = static_cast<int>(d.job);
  RefJob& job = m.jobs[j];
  // A Retype names a known type that the job's spec allows, whatever its state (the core checks
  // that before the lifecycle).
  const int retype_to = d.event == EventKind::kRetype ? type_named(m, d.device_type) : -1;
  if (d.event == EventKind::kRetype) {
    if (retype_to < 0) return reject("unknown device type");
    const bool allowed = job.types.empty() ? retype_to == job.dtype
                                           : std::find(job.types.begin(), job.types.end(), retype_to) != job.types.end();
    if (!allowed) return reject("a type the job's spec does not allow");
  }
  const JobState s = job.state;
  // An operator's preemption or shrink for no one (orrery suspend, orrery resize): allowed to
  // operators only, whatever the tiers.
  const bool for_no_one = d.origin == spec::Origin::kOperator && d.beneficiary == -1;
  p.job = j;
  p.from = s;
  std::string why = "no transition";
  JobState to = s;
  bool ok = false;

  switch (d.event) {
    case EventKind::kSubmit:
      break;  // handled above
    case EventKind::kAdmit:
      if (s != JobState::kSubmitted) break;
      // A premium job beyond the reserve is admitted all the same, spare.
      job.spare = job.tier == 0 && static_cast<__int128>(m.premium_admitted()) + job.min_dev >
                                       m.reserve;
      ok = true;
      to = JobState::kQueued;
      break;
    case EventKind::kPlace:
    case EventKind::kResume:
      if (s != (d.event == EventKind::kPlace ? JobState::kQueued : JobState::kSuspended)) break;
      if (job.hold) {
        why = "held by an operator";
        break;
      }
      if (!gang_fits(m, j, sel, d.splice, why)) break;
      ok = true;
      to = d.event == EventKind::kPlace ? JobState::kPlaced : JobState::kRestoring;
      ++job.epoch;
      // A spare job joins the premium reserve if it has room now.
      if (job.spare && static_cast<__int128>(m.premium_admitted()) + job.min_dev <= m.reserve)
        job.spare = false;
      // The job stops waiting: what was reserved for it and not taken is free for anybody again.
      p.resv_consumed = take(m, j, sel, d.splice, &p.resv_overridden);
      p.resv_voided = void_reservations(m, j);
      break;
    case EventKind::kStart:
      if (s != JobState::kPlaced) break;
      ok = true;
      to = JobState::kRunning;
      break;
    case EventKind::kProgress:
      // Running, and while a cut is in flight: the workers run on until it is taken.
      if (s != JobState::kRunning && s != JobState::kCheckpointing && !ref_moving(s)) break;
      if (d.step < job.progress || d.gpu_ms < 0) {
        why = "step backwards or negative gpu time";
        break;
      }
      if (static_cast<__int128>(job.attained) + d.gpu_ms > kRefMaxAttained) {
        why = "attained service would exceed its bound";
        break;
      }
      ok = true;
      to = s;
      job.progress = d.step;
      job.attained += d.gpu_ms;
      break;
    case EventKind::kCheckpoint:
      if (s != JobState::kRunning && s != JobState::kCheckpointing && !ref_moving(s)) break;
      if (d.step < 0 || d.step < job.ckpt || d.step > job.progress) {
        why = "checkpoint step out of [max(ckpt, 0), progress]";
        break;
      }
      if (!job.transparent()) {  // its only cut stops it
        why = "a signal or requeue job takes no checkpoint while it runs";
        break;
      }
      ok = true;
      to = s;
      job.ckpt = d.step;
      break;
    case EventKind::kResizeUp: {
      if (s != JobState::kRunning) break;
      if (!job.transparent()) {
        why = "a signal or requeue job is not resized";
        break;
      }
      bool keeps = true;
      for (int dev : job.devices) keeps = keeps && sel.count(dev);
      if (!keeps) {
        why = "drops a held device";
        break;
      }
      if (sel.size() <= job.devices.size()) {
        why = "not more devices";
        break;
      }
      if (!gang_fits(m, j, sel, d.splice, why)) break;
      ok = true;
      to = JobState::kResizing;
      p.resv_created = plan_move(m, j, sel, d.splice, -1, p.resv_voided);
      break;
    }
    case EventKind::kResizeDown: {
      if (s != JobState::kRunning) break;
      if (!job.transparent()) {
        why = "a signal or requeue job is not resized";
        break;
      }
      bool subset = true;
      for (int dev : sel) subset = subset && job.devices.count(dev);
      if (!subset) {
        why = "not a subset";
        break;
      }
      if (sel.size() >= job.devices.size()) {
        why = "not fewer devices";
        break;
      }
      if (!for_no_one && !ref_favoured(m, d.beneficiary, j)) {
        why = "beneficiary not favoured";
        break;
      }
      if (!for_no_one && !fits_devices(m, d.beneficiary, j)) {
        why = "beneficiary's workers do not fit the devices";
        break;
      }
      if (!gang_fits(m, j, sel, d.splice, why)) break;
      ok = true;
      to = JobState::kResizing;
      // Nothing is given up yet: the devices go (reserved for the beneficiary, if it still waits
      // then) when the cut is stored. A subset reserves nothing.
      p.resv_created = plan_move(m, j, sel, d.splice, d.beneficiary, p.resv_voided);
      break;
    }
    case EventKind::kPreempt:
      if (s != JobState::kRunning) break;
      if (!for_no_one && !ref_favoured(m, d.beneficiary, j)) {
        why = "beneficiary not favoured";
        break;
      }
      if (!for_no_one && !fits_devices(m, d.beneficiary, j)) {
        why = "beneficiary's workers do not fit the devices";
        break;
      }
      ok = true;
      to = JobState::kCheckpointing;
      job.ben = d.beneficiary;
      job.hold = for_no_one;  // an operator's suspension holds the job until it is released
      break;
    case EventKind::kCheckpointDone:
      if (s == JobState::kCheckpointing) {
        if (d.step != job.progress) {
          why = "cut not at the current step";
          break;
        }
        ok = true;
        to = JobState::kSuspended;
        store_cut(job, d.step);
        // The beneficiary may have been placed or cancelled since: then nothing is reserved.
        p.suspend_without_reservation =
            !(job.ben >= 0 && job.ben < m.num_jobs() && ref_waiting(m.jobs[job.ben].state));
        p.resv_created = release(m, j, job.ben);
        job.ben = -1;
        break;
      }
      if (!ref_moving(s)) break;
      // A migration's or resize's cut is stored: the move is carried out if its target still
      // fits now (a job that outranks this one may have taken a device reserved for it).
      if (!gang_fits(m, j, job.target, job.tsplice, why)) {
        p.move_target_lost = true;
        why = "move target no longer fits: " + why;
        break;
      }
      if (d.step != job.progress) {
        why = "cut not at the current step";
        break;
      }
      {
        ok = true;
        to = JobState::kRestoring;
        store_cut(job, d.step);
        ++job.epoch;  // a new incarnation on the target
        // The devices left behind go back, reserved for a shrink's beneficiary if it still waits.
        const bool for_ben = job.ben >= 0 && job.ben < m.num_jobs() &&
                             ref_waiting(m.jobs[static_cast<std::size_t>(job.ben)].state);
        for (int dev : job.devices)
          if (!job.target.count(dev) && for_ben) {
            m.reserved_for[dev] = static_cast<int>(job.ben);
            ++p.resv_created;
          }
        const std::set<int> target = job.target;
        const std::int64_t tsplice = job.tsplice;
        p.resv_consumed = take(m, j, target, tsplice, &p.resv_overridden);
        // The job is no longer moving: nothing stays reserved for it.
        p.resv_voided = void_reservations(m, j);
        forget_move(job);
      }
      break;
    case EventKind::kRestoreDone:
      if (s != JobState::kRestoring) break;
      ok = true;
      to = JobState::kRunning;
      break;
    case EventKind::kMigrate:
      // No step: the cut is taken later, at whatever step the job has reached then.
      if (s != JobState::kRunning) break;
      if (sel.size() < job.devices.size()) {
        why = "fewer devices than now";
        break;
      }
      if (!gang_fits(m, j, sel, d.splice, why)) break;
      ok = true;
      to = JobState::kMigrating;
      p.resv_created = plan_move(m, j, sel, d.splice, -1, p.resv_voided);
      break;
    case EventKind::kComplete:
      if (s != JobState::kRunning) break;
      ok = true;
      to = JobState::kCompleted;
      release(m, j);
      break;
    case EventKind::kWorkerCrash:
    case EventKind::kNodeLoss: {
      if (!ref_holding(s)) break;
      // A worker crash is the job's own failure and spends a retry; a node loss is the
      // platform's and spends the platform cap instead.
      const bool own = d.event == EventKind::kWorkerCrash;
      ok = true;
      to = (own ? job.failures < kRefMaxRetries : job.faults < kRefMaxPlatformFaults)
               ? JobState::kQueued
               : JobState::kFailed;
      // A preemption or a shrink cut short by the failure still leaves the devices (all of them)
      // to the job it was for; a move in flight is forgotten, its target's reservations end.
      p.resv_created = release(m, j, job.ben);
      p.resv_voided = void_reservations(m, j);
      forget_move(job);
      roll_back(job);
      ++(own ? job.failures : job.faults);
      break;
    }
    case EventKind::kAbort:
      if (s == JobState::kPlaced || s == JobState::kRestoring) {
        // A launch or a restore that did not happen: the devices go back (reserved for nobody),
        // the job waits again from its last checkpoint. Not the job's fault: no failure counted.
        ok = true;
        to = JobState::kQueued;
        p.resv_created = release(m, j);
        p.resv_voided = void_reservations(m, j);
        forget_move(job);
        roll_back(job);
      } else if (s == JobState::kCheckpointing || ref_moving(s)) {
        // A cut that failed, was refused or timed out: the job restarts where it is, on the same
        // devices, as a new incarnation, from its last checkpoint; the decision is forgotten.
        ok = true;
        to = JobState::kPlaced;
        ++job.epoch;
        p.resv_voided = void_reservations(m, j);
        forget_move(job);
        roll_back(job);
        job.hold = false;  // an operator's suspension that did not happen holds nothing
      }
      break;
    case EventKind::kCancel:
      if (s == JobState::kNew || s == JobState::kCompleted || s == JobState::kFailed ||
          s == JobState::kCancelled)
        break;
      ok = true;
      to = JobState::kCancelled;
      p.resv_created = release(m, j, job.ben);  // as for a failure while checkpointing
      p.resv_voided = void_reservations(m, j);
      forget_move(job);
      break;
    case EventKind::kRelease:
      if (!ref_waiting(s)) break;
      ok = true;
      to = s;
      p.resv_voided = void_reservations(m, j);
      job.hold = false;  // orrery resume: the planners may place or resume it again
      break;
    case EventKind::kRetype:
      // A waiting job, not held by an operator, to another type; its reservations (of the old
      // type) go.
      if (!ref_waiting(s)) break;
      if (job.hold) {
        why = "held by an operator";
        break;
      }
      if (retype_to == job.dtype) {
        why = "its own type";
        break;
      }
      ok = true;
      to = s;
      job.dtype = retype_to;
      p.resv_voided = void_reservations(m, j);
      break;
  }
  if (!ok) {
    p.blocked_by_reservation = why.ends_with("device reserved for another job");
    return reject(why);
  }
  job.state = to;
  ++m.committed;
  p.accepted = true;
  p.to = to;
  return p;
}

}  // namespace orrery::proptest
