#include "proptests/generators.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace orrery::proptest {

using spec::EventKind;
using spec::JobState;

namespace {

bool in(JobState s, std::initializer_list<JobState> states) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

// A target job: mostly one of `preferred` (where the event is legal or interesting), sometimes any,
// rarely one that does not exist.
std::int64_t pick_job(const RefModel& m, const std::vector<int>& preferred) {
  const int n = m.num_jobs();
  const int roll = uniform(0, 100);
  if (roll < 82 && !preferred.empty()) return *rc::gen::elementOf(preferred);
  if (roll < 97 && n > 0) return uniform(0, n);
  return *rc::gen::element<std::int64_t>(-1, n, n + 5, -1000);  // nonexistent
}

std::vector<int> jobs_where(const RefModel& m, const std::function<bool(int)>& pred) {
  std::vector<int> out;
  for (int j = 0; j < m.num_jobs(); ++j)
    if (pred(j)) out.push_back(j);
  return out;
}

std::vector<int> jobs_in(const RefModel& m, std::initializer_list<JobState> states) {
  return jobs_where(m, [&](int j) { return in(m.jobs[j].state, states); });
}

std::int64_t pick_job(const RefModel& m, std::initializer_list<JobState> preferred) {
  return pick_job(m, jobs_in(m, preferred));
}

// Steering predicates: only used to make interesting decisions likely.

// A device job j could take: free, of its type, and reserved for nobody else.
bool available_to(const RefModel& m, int j, int dev) {
  return m.dev_type[dev] == m.jobs[j].dtype && m.holder_of(dev) < 0 &&
         (m.reserved_for[dev] < 0 || m.reserved_for[dev] == j);
}
// A free device of job j's type that another (waiting or moving) job has a reservation on.
bool reserved_for_other(const RefModel& m, int j, int dev) {
  return m.dev_type[dev] == m.jobs[j].dtype && m.holder_of(dev) < 0 && m.reserved_for[dev] >= 0 &&
         m.reserved_for[dev] != j;
}
int available_count(const RefModel& m, int j) {
  int n = 0;
  for (int dev = 0; dev < m.num_devices(); ++dev) n += available_to(m, j, dev) ? 1 : 0;
  return n;
}
bool running(const RefModel& m, int j) { return m.jobs[j].state == JobState::kRunning; }
// The workers run (and report progress and checkpoints): Running, or a cut in flight.
bool stepping(const RefModel& m, int j) {
  return in(m.jobs[j].state, {JobState::kRunning, JobState::kCheckpointing, JobState::kMigrating,
                              JobState::kResizing});
}
bool moving(const RefModel& m, int j) { return ref_moving(m.jobs[j].state); }
// A moving job whose target still fits: its cut can be stored and the move carried out.
bool move_fits(const RefModel& m, int j) {
  return moving(m, j) && ref_gang_fits(m, j, m.jobs[j].target, m.jobs[j].tsplice);
}
// A moving job whose target no longer fits: its move can only be aborted.
bool move_stuck(const RefModel& m, int j) { return moving(m, j) && !move_fits(m, j); }
// A job with a cut or a restore in flight whose next failure is its last: the rows that fail such
// a job for good (from Checkpointing, Migrating, Resizing, Restoring) are rare unless steered to.
// (Not Placed: killing it there keeps it from reaching the others.)
bool veteran(const RefModel& m, int j) {
  return ref_in_flight(m.jobs[j].state) && m.jobs[j].state != JobState::kPlaced &&
         m.jobs[j].failures >= kRefMaxRetries;
}
// An elastic job holding devices with retries left: crashing it climbs it towards its last retry,
// where the rows that fail a job for good start (see veteran()). Only an elastic job can then be
// resized into Resizing, the rarest of them.
bool climber(const RefModel& m, int j) {
  return ref_holding(m.jobs[j].state) && m.jobs[j].failures < kRefMaxRetries &&
         ref_feasible_counts(m.jobs[j]).size() > 1;
}
bool resizing_veteran(const RefModel& m, int j) {
  return veteran(m, j) && m.jobs[j].state == JobState::kResizing;
}
// One time in two, the jobs of `jobs` whose next failure is their last, when there are any: a
// preemption, migration or resize of one of them makes a veteran.
std::vector<int> prefer_worn(const RefModel& m, std::vector<int> jobs) {
  std::vector<int> worn;
  for (int j : jobs)
    if (m.jobs[j].failures >= kRefMaxRetries) worn.push_back(j);
  return !worn.empty() && uniform(0, 2) == 0 ? worn : jobs;
}
bool can_grow(const RefModel& m, int j) {
  if (!running(m, j)) return false;
  const auto held = static_cast<std::int64_t>(m.jobs[j].devices.size());
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c > held && c - held <= available_count(m, j)) return true;
  return false;
}
bool can_shrink(const RefModel& m, int j) {
  if (!running(m, j)) return false;
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c < static_cast<std::int64_t>(m.jobs[j].devices.size())) return true;
  return false;
}
// A waiting job (Queued for Place, Suspended for Resume) with a device count that the devices
// available to it could take (host memory aside).
bool can_take(const RefModel& m, int j, JobState waiting_in) {
  if (m.jobs[j].state != waiting_in) return false;
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c <= available_count(m, j)) return true;
  return false;
}
bool has_favoured(const RefModel& m, int v) {
  for (int b = 0; b < m.num_jobs(); ++b)
    if (ref_favoured(m, b, v)) return true;
  return false;
}
// Some device job j needs is free but reserved for another job: a placement, resume, migration or
// growth of j can be steered onto it.
bool could_trespass(const RefModel& m, int j) {
  for (int dev = 0; dev < m.num_devices(); ++dev)
    if (reserved_for_other(m, j, dev)) return true;
  return false;
}
// ... and j takes precedence over that job, so it may take the device (the reservation never keeps
// a higher tier waiting): e.g. a queued premium job onto the target of a basic job's migration.
bool may_override(const RefModel& m, int j, int dev) {
  return reserved_for_other(m, j, dev) && ref_favoured(m, j, m.reserved_for[dev]);
}
bool could_override(const RefModel& m, int j) {
  for (int dev = 0; dev < m.num_devices(); ++dev)
    if (may_override(m, j, dev)) return true;
  return false;
}

// A beneficiary: mostly one the tier rules favour over `j`, else a waiting job, else anything.
std::int64_t pick_beneficiary(const RefModel& m, std::int64_t j) {
  const int n = m.num_jobs();
  std::vector<int> favoured, waiting;
  for (int k = 0; k < n; ++k) {
    if (j >= 0 && j < n && ref_favoured(m, k, static_cast<int>(j))) favoured.push_back(k);
    if (k != j && ref_waiting(m.jobs[k].state)) waiting.push_back(k);
  }
  const int roll = uniform(0, 100);
  if (roll < 72 && !favoured.empty()) return *rc::gen::elementOf(favoured);
  if (roll < 85 && !waiting.empty()) return *rc::gen::elementOf(waiting);
  return uniform<std::int64_t>(-1, n + 1);
}

// `k` distinct elements of `from`, in random order, returned sorted.
std::vector<int> choose(const std::vector<int>& from, std::size_t k) {
  auto keys = *rc::gen::container<std::vector<int>>(from.size(), uniform_gen(0, 1 << 16));
  std::vector<std::size_t> idx(from.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return keys[a] < keys[b]; });
  std::vector<int> out;
  for (std::size_t i = 0; i < std::min(k, idx.size()); ++i) out.push_back(from[idx[i]]);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  return out;
}

enum class SelKind { kFresh, kMigrate, kGrow, kShrink };

// A device set and splice for job j: mostly one that satisfies the count/type/exclusivity/
// reservation rules given the model's free devices (host memory is left to chance), taking the
// devices reserved for j first when it has any (so its reservations get consumed); about one time
// in four, when another job holds a reservation on a device j could use, one that includes such a
// device and satisfies every other rule (so the core's "not reserved for another job" clause is
// what rejects it); sometimes arbitrary.
void pick_selection(const RefModel& m, std::int64_t j, SelKind kind, core::Decision& d) {
  const int roll = uniform(0, 100);
  if (roll < 78 && j >= 0 && j < m.num_jobs()) {
    const int jj = static_cast<int>(j);
    const RefJob& job = m.jobs[jj];
    std::vector<int> own(job.devices.begin(), job.devices.end()), avail, mine, blocked, over;
    for (int dev = 0; dev < m.num_devices(); ++dev) {
      if (available_to(m, jj, dev)) avail.push_back(dev);
      if (available_to(m, jj, dev) && m.reserved_for[dev] == jj) mine.push_back(dev);
      if (reserved_for_other(m, jj, dev)) blocked.push_back(dev);
      if (may_override(m, jj, dev)) over.push_back(dev);
    }
    // Mostly onto the reservations j may override, when there are any (so that a job's
    // reservations do get taken by one that outranks it), else onto any.
    if (!over.empty() && uniform(0, 3) != 0) blocked = over;
    const bool trespass = kind != SelKind::kShrink && !blocked.empty() &&
                          uniform(0, over.empty() ? 4 : 2) == 0;
    const auto held = static_cast<std::int64_t>(own.size());
    const auto nfree = static_cast<std::int64_t>(avail.size() + (trespass ? blocked.size() : 0));
    std::vector<std::int64_t> counts;
    for (auto c : ref_feasible_counts(job)) {
      bool ok = false;
      switch (kind) {
        case SelKind::kFresh:
          ok = c <= nfree && (!trespass || c >= 1);
          break;
        case SelKind::kMigrate:
          ok = held <= c && c <= nfree + held;
          break;
        case SelKind::kGrow:
          ok = held < c && c <= nfree + held;
          break;
        case SelKind::kShrink:
          ok = 0 < c && c < held;
          break;
      }
      if (ok) counts.push_back(c);
    }
    if (!counts.empty()) {
      // `k` new devices: with `trespass`, at least one reserved for another job; then j's own
      // reservations (mostly); then any available ones, or from `extra` too.
      auto fill = [&](std::size_t k, const std::vector<int>& extra) {
        std::vector<int> out;
        if (trespass && k > 0)
          out = choose(blocked, static_cast<std::size_t>(uniform<std::size_t>(
                                    1, std::min(k, blocked.size()) + 1)));
        if (!mine.empty() && uniform(0, 4) != 0) {
          auto take = choose(mine, k - out.size());
          out.insert(out.end(), take.begin(), take.end());
        }
        std::vector<int> pool = minus(avail, out);
        pool.insert(pool.end(), extra.begin(), extra.end());
        if (out.size() < k) {
          auto rest = choose(pool, k - out.size());
          out.insert(out.end(), rest.begin(), rest.end());
        }
        return out;
      };
      // With `trespass`, fit is judged as if the reservations were not there: the selection
      // should break that rule alone.
      RefModel probe = m;
      if (trespass)
        for (int dev : blocked) probe.reserved_for[dev] = -1;
      // Host memory is left to chance one time in three; otherwise a few draws look for a set
      // that fits it too, so that jobs do get to run on the tight test fleets.
      const int tries = uniform(0, 3) == 2 ? 1 : 4;
      for (int attempt = 0; attempt < tries; ++attempt) {
        const auto c = static_cast<std::size_t>(*rc::gen::elementOf(counts));
        std::vector<int> sel;
        switch (kind) {
          case SelKind::kFresh:
            sel = fill(c, {});
            break;
          case SelKind::kShrink:
            sel = choose(own, c);
            break;
          case SelKind::kGrow:
            sel = fill(c - own.size(), {});
            sel.insert(sel.end(), own.begin(), own.end());
            break;
          case SelKind::kMigrate:
            // Mostly onto other devices; sometimes overlapping the current ones.
            sel = fill(c, uniform(0, 3) == 0 || avail.size() < c ? own : std::vector<int>{});
            break;
        }
        std::sort(sel.begin(), sel.end());
        sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
        d.devices.assign(sel.begin(), sel.end());
        d.splice = sel.empty() ? 0 : job.world / static_cast<std::int64_t>(sel.size());
        if (ref_gang_fits(probe, jj, std::set<int>(sel.begin(), sel.end()), d.splice)) break;
      }
      return;
    }
  }
  // Arbitrary: any devices, any splice; rarely a device outside the fleet or listed twice.
  std::vector<int> all(static_cast<std::size_t>(m.num_devices()));
  for (int i = 0; i < m.num_devices(); ++i) all[i] = i;
  auto sel = choose(all, static_cast<std::size_t>(uniform(0, m.num_devices() + 1)));
  d.devices.assign(sel.begin(), sel.end());
  d.splice = uniform(0, 6);
  const int bad = uniform(0, 20);
  if (bad == 19) d.devices.push_back(m.num_devices());
  if (bad == 18) d.devices.push_back(-1);
  if (bad == 17 && !d.devices.empty()) d.devices.push_back(d.devices.front());
}

bool j_ok(const RefModel& m, std::int64_t j) { return j >= 0 && j < m.num_jobs(); }

// The current progress/checkpoint of a job, or 0/-1 when it does not exist.
std::int64_t progress_of(const RefModel& m, std::int64_t j) {
  return j_ok(m, j) ? m.jobs[j].progress : 0;
}
std::int64_t ckpt_of(const RefModel& m, std::int64_t j) {
  return j_ok(m, j) ? m.jobs[j].ckpt : -1;
}

// ---- One generator per event ----

core::Decision gen_admit(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kAdmit;
  d.job = pick_job(m, {JobState::kSubmitted});
  return d;
}

// Place (Queued) or Resume (Suspended): mostly a job whose gang the available devices could
// take, and a job with reservations of its own more often still, so reservations get consumed.
core::Decision gen_acquire(const RefModel& m, EventKind e) {
  core::Decision d;
  d.event = e;
  const JobState from = e == EventKind::kPlace ? JobState::kQueued : JobState::kSuspended;
  auto fits = jobs_where(m, [&](int j) { return can_take(m, j, from); });
  auto owners = jobs_where(
      m, [&](int j) { return can_take(m, j, from) && !reserved_devices(m, j).empty(); });
  const int roll = uniform(0, 4);
  d.job = pick_job(m, !owners.empty() && roll < 2 ? owners
                      : !fits.empty() && roll != 3 ? fits
                                                   : jobs_in(m, {from}));
  pick_selection(m, d.job, SelKind::kFresh, d);
  return d;
}

core::Decision gen_start(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kStart;
  d.job = pick_job(m, {JobState::kPlaced});
  return d;
}

// Progress and periodic checkpoints: from running jobs and from jobs whose cut is in flight (the
// workers run on until it is taken).
core::Decision gen_progress(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kProgress;
  d.job = pick_job(m, jobs_where(m, [&](int j) { return stepping(m, j); }));
  const auto p = progress_of(m, d.job);
  d.step = uniform(0, 10) == 9 ? p - 1 : p + uniform(0, 5);
  d.gpu_ms = uniform(0, 20) == 19 ? -1 : uniform(0, 400);
  if (uniform(0, 20) == 19) {  // at or past the attained-service bound, or near int64's
    const auto attained = j_ok(m, d.job) ? m.jobs[d.job].attained : 0;
    d.gpu_ms = *rc::gen::element<std::int64_t>(
        kRefMaxAttained - attained, kRefMaxAttained - attained + 1,
        std::numeric_limits<std::int64_t>::max() - attained / 2);
  }
  return d;
}

core::Decision gen_checkpoint(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kCheckpoint;
  d.job = pick_job(m, jobs_where(m, [&](int j) { return stepping(m, j); }));
  const auto p = progress_of(m, d.job);
  const auto c = std::max<std::int64_t>(ckpt_of(m, d.job), 0);
  const int roll = uniform(0, 10);
  d.step = roll == 9 ? p + 1 : roll == 8 ? c - 1 : uniform(c, std::max(c, p) + 1);
  return d;
}

core::Decision gen_preempt(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kPreempt;
  d.job = pick_job(
      m, prefer_worn(m, jobs_where(m, [&](int j) { return running(m, j) && has_favoured(m, j); })));
  // Now and then for no one: an operator's suspension (the core refuses it from anybody else).
  d.beneficiary = uniform(0, 8) == 0 ? -1 : pick_beneficiary(m, d.job);
  return d;
}

// The cut is stored: of a preemption (Checkpointing) or of a move (Migrating, Resizing), mostly
// one whose target still fits, sometimes one whose target was lost (the core must refuse it).
core::Decision gen_checkpoint_done(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kCheckpointDone;
  auto ready = jobs_where(m, [&](int j) {
    return m.jobs[j].state == JobState::kCheckpointing || move_fits(m, j);
  });
  d.job = pick_job(m, !ready.empty() && uniform(0, 8) != 0
                          ? ready
                          : jobs_in(m, {JobState::kCheckpointing, JobState::kMigrating,
                                        JobState::kResizing}));
  d.step = progress_of(m, d.job) +
           *rc::gen::weightedElement<std::int64_t>({{16, 0}, {1, -1}, {1, 1}});
  return d;
}

core::Decision gen_restore_done(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kRestoreDone;
  d.job = pick_job(m, uniform(0, 10) != 0 ? jobs_in(m, {JobState::kRestoring})
                                          : jobs_in(m, {JobState::kMigrating, JobState::kResizing}));
  return d;
}

// An in-flight operation failed, was refused or timed out: a launch (Placed), a cut (Checkpointing,
// Migrating, Resizing) or a restore (Restoring); more often a move whose target was lost, which
// can end no other way. Sometimes a job with nothing in flight (no row). The origin is picked by
// pick_origin (runtime, core, operator, or a planner, which may not).
core::Decision gen_abort(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kAbort;
  auto stuck = jobs_where(m, [&](int j) { return move_stuck(m, j); });
  d.job = pick_job(m, !stuck.empty() && uniform(0, 2) == 0
                          ? stuck
                          : jobs_in(m, {JobState::kPlaced, JobState::kCheckpointing,
                                        JobState::kMigrating, JobState::kResizing,
                                        JobState::kRestoring}));
  // Parameters an Abort does not read: they must not matter.
  if (uniform(0, 4) == 0) d.step = uniform(-2, 30);
  return d;
}

core::Decision gen_migrate(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kMigrate;
  d.job = pick_job(m, prefer_worn(m, jobs_in(m, {JobState::kRunning})));
  pick_selection(m, d.job, SelKind::kMigrate, d);
  // A migration carries no step (the cut is taken later): whatever it says must not matter.
  if (uniform(0, 4) == 0) d.step = progress_of(m, d.job) + uniform(-2, 3);
  return d;
}

core::Decision gen_resize_up(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kResizeUp;
  d.job = pick_job(m, prefer_worn(m, jobs_where(m, [&](int j) { return can_grow(m, j); })));
  pick_selection(m, d.job, SelKind::kGrow, d);
  return d;
}

core::Decision gen_resize_down(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kResizeDown;
  d.job = pick_job(m, prefer_worn(m, jobs_where(m, [&](int j) {
                        return can_shrink(m, j) && has_favoured(m, j);
                      })));
  pick_selection(m, d.job, SelKind::kShrink, d);
  d.beneficiary = uniform(0, 8) == 0 ? -1 : pick_beneficiary(m, d.job);  // -1: an operator's
  return d;
}

core::Decision gen_complete(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kComplete;
  d.job = pick_job(m, {JobState::kRunning});
  return d;
}

core::Decision gen_worker_crash(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kWorkerCrash;
  auto veterans = jobs_where(m, [&](int j) { return veteran(m, j); });
  if (!veterans.empty() && uniform(0, 2) == 0) {
    // Veterans in Resizing first: they are the rarest (a resize needs an elastic job with room to
    // grow or a favoured job to shrink for), and a resize's cut soon ends.
    auto resizing = jobs_where(m, [&](int j) { return resizing_veteran(m, j); });
    d.job = pick_job(m, resizing.empty() ? veterans : resizing);
    return d;
  }
  auto climbers = jobs_where(m, [&](int j) { return climber(m, j); });
  d.job = pick_job(m, !climbers.empty() && uniform(0, 2) == 0
                          ? climbers
                          : jobs_in(m, {JobState::kPlaced, JobState::kRunning,
                                        JobState::kCheckpointing, JobState::kMigrating,
                                        JobState::kResizing, JobState::kRestoring}));
  return d;
}

// Cancellation: any live job, and often one that has reservations (they must end with it).
core::Decision gen_cancel(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kCancel;
  auto owners = jobs_where(m, [&](int j) { return !reserved_devices(m, j).empty(); });
  if (!owners.empty() && uniform(0, 3) == 0) {
    d.job = *rc::gen::elementOf(owners);
  } else {
    d.job = pick_job(m, {JobState::kSubmitted, JobState::kQueued, JobState::kPlaced,
                         JobState::kRunning, JobState::kCheckpointing, JobState::kSuspended,
                         JobState::kMigrating, JobState::kResizing, JobState::kRestoring});
  }
  return d;
}

// Giving up reservations: mostly a waiting job that has some, else any waiting job (Release is
// legal without reservations too), else anything.
core::Decision gen_release(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kRelease;
  auto owners = jobs_where(m, [&](int j) { return !reserved_devices(m, j).empty(); });
  d.job = pick_job(m, !owners.empty() && uniform(0, 4) != 0
                          ? owners
                          : jobs_in(m, {JobState::kQueued, JobState::kSuspended}));
  return d;
}

// Another device type: mostly for a waiting job whose spec names several, one of them; sometimes
// any job and any name (refused unless allowed and waiting).
core::Decision gen_retype(const RefModel& m) {
  core::Decision d;
  d.event = EventKind::kRetype;
  auto flexible = jobs_where(m, [&](int j) {
    return !m.jobs[j].types.empty() && in(m.jobs[j].state, {JobState::kQueued, JobState::kSuspended});
  });
  d.job = pick_job(m, flexible);
  const bool known_job = d.job >= 0 && d.job < m.num_jobs();
  if (known_job && !m.jobs[d.job].types.empty() && uniform(0, 5) != 0) {
    const auto& job = m.jobs[d.job];
    std::vector<int> others;
    for (int t : job.types)
      if (t != job.dtype) others.push_back(t);
    d.device_type = m.type_names[others.empty() || uniform(0, 8) == 0 ? job.dtype : *rc::gen::elementOf(others)];
  } else {
    d.device_type = *rc::gen::element<std::string>("A", "B", "C");
  }
  return d;
}

}  // namespace

std::vector<int> reserved_devices(const RefModel& m, int j) {
  std::vector<int> out;
  for (int dev = 0; dev < m.num_devices(); ++dev)
    if (m.reserved_for[dev] == j) out.push_back(dev);
  return out;
}

std::vector<core::Decision> Step::decisions(const RefModel& m) const {
  switch (kind) {
    case Kind::kDecision:
      return {decision};
    case Kind::kClock:
      return {};
    case Kind::kNodeLoss: {
      // The core has no node-loss broadcast: every job holding a device on the node gets its own
      // NodeLoss decision.
      std::vector<core::Decision> out;
      for (int j = 0; j < m.num_jobs(); ++j) {
        bool on_node = false;
        for (int dev : m.jobs[j].devices) on_node = on_node || m.dev_node[dev] == node;
        if (!on_node) continue;
        core::Decision d;
        d.event = EventKind::kNodeLoss;
        d.origin = origin;
        d.job = j;
        out.push_back(d);
      }
      return out;
    }
  }
  return {};
}

std::string show_decision(const core::Decision& d) {
  std::ostringstream o;
  o << d.describe();
  if (d.event == EventKind::kSubmit)
    o << " mem=" << d.mem_mib << " (tier " << static_cast<int>(d.tier) << ")";
  o << " [" << spec::origin_name(d.origin) << "]";
  return o.str();
}

std::string Step::show() const {
  switch (kind) {
    case Kind::kDecision:
      return show_decision(decision);
    case Kind::kClock:
      return "ClockAdvance " + std::to_string(ms) + " ms";
    case Kind::kNodeLoss:
      return "NodeLoss of node " + std::to_string(node) +
             " (NodeLoss for every job holding a device on it) [" +
             std::string(spec::origin_name(origin)) + "]";
  }
  return "?";
}

Step next_step(const RefModel& m) {
  std::array<int, spec::kNumJobStates> n{};
  for (const auto& j : m.jobs) ++n[static_cast<std::size_t>(j.state)];
  auto has = [&](JobState s) { return n[static_cast<std::size_t>(s)] > 0 ? 1 : 0; };
  const int any_running = has(JobState::kRunning);
  const int waiting = has(JobState::kQueued) | has(JobState::kSuspended);
  int holding = 0, growable = 0, preemptible = 0, shrinkable = 0, placeable = 0, resumable = 0;
  int trespass_place = 0, trespass_resume = 0, trespass_running = 0;
  int owner_placeable = 0, owner_resumable = 0;  // with reservations of their own to consume
  int override_place = 0, override_resume = 0;   // may take a reservation of a job they outrank
  int cutting = 0, movable = 0, stuck = 0, in_flight = 0, retypable = 0;
  // The way to the row Resizing --WorkerCrash--> Failed: crash an elastic job up to its last retry
  // (climbing), resize it there (a running job whose next failure is its last that could grow or
  // shrink), then crash the veteran in Resizing. Without these weights a run of 10,000 sequences
  // took that row 0-6 times and now and then failed its coverage check; with them, about 30.
  int worn_growable = 0, worn_shrinkable = 0, resizing_veterans = 0, climbing = 0;
  std::vector<int> veterans;
  for (int j = 0; j < m.num_jobs(); ++j) {
    const JobState st = m.jobs[j].state;
    if (veteran(m, j)) veterans.push_back(j);
    resizing_veterans |= resizing_veteran(m, j) ? 1 : 0;
    climbing |= climber(m, j) ? 1 : 0;
    cutting |= in(st, {JobState::kCheckpointing, JobState::kMigrating, JobState::kResizing}) ? 1 : 0;
    movable |= move_fits(m, j) ? 1 : 0;
    stuck |= move_stuck(m, j) ? 1 : 0;
    in_flight |= ref_in_flight(st) ? 1 : 0;
    if (could_override(m, j)) {
      override_place |= st == JobState::kQueued ? 1 : 0;
      override_resume |= st == JobState::kSuspended ? 1 : 0;
    }
    placeable |= can_take(m, j, JobState::kQueued) ? 1 : 0;
    resumable |= can_take(m, j, JobState::kSuspended) ? 1 : 0;
    holding |= ref_holding(m.jobs[j].state) ? 1 : 0;
    retypable |= !m.jobs[j].types.empty() && in(st, {JobState::kQueued, JobState::kSuspended}) ? 1 : 0;
    const int worn = m.jobs[j].failures >= kRefMaxRetries ? 1 : 0;
    const int grows = can_grow(m, j) ? 1 : 0;
    growable |= grows;
    worn_growable |= worn & grows;
    if (running(m, j) && has_favoured(m, j)) {
      preemptible = 1;
      const int shrinks = can_shrink(m, j) ? 1 : 0;
      shrinkable |= shrinks;
      worn_shrinkable |= worn & shrinks;
    }
    if (!reserved_devices(m, j).empty()) {
      owner_placeable |= can_take(m, j, JobState::kQueued) ? 1 : 0;
      owner_resumable |= can_take(m, j, JobState::kSuspended) ? 1 : 0;
    }
    if (could_trespass(m, j)) {
      trespass_place |= m.jobs[j].state == JobState::kQueued ? 1 : 0;
      trespass_resume |= m.jobs[j].state == JobState::kSuspended ? 1 : 0;
      trespass_running |= running(m, j) ? 1 : 0;
    }
  }
  int reservations = 0;
  for (int r : m.reserved_for) reservations |= r >= 0 ? 1 : 0;
  const int submit = m.num_jobs() < 3 ? 12 : m.num_jobs() < 6 ? 5 : 1;

  Step step;
  auto decide = [&](core::Decision (*gen)(const RefModel&)) {
    step.decision = gen(m);
    step.decision.origin = pick_origin(step.decision.event);
  };
  const std::pair<int, std::function<void()>> table[] = {
      {submit, [&] { decide(&gen_submit); }},
      {2 + 12 * has(JobState::kSubmitted), [&] { decide(&gen_admit); }},
      {2 + 3 * has(JobState::kQueued) + 14 * placeable + 4 * trespass_place + 10 * owner_placeable +
           6 * override_place,
       [&] { decide([](const RefModel& mm) { return gen_acquire(mm, EventKind::kPlace); }); }},
      {1 + 12 * has(JobState::kPlaced), [&] { decide(&gen_start); }},
      {1 + 7 * any_running + 3 * cutting, [&] { decide(&gen_progress); }},
      {1 + 3 * any_running + 2 * cutting, [&] { decide(&gen_checkpoint); }},
      {1 + 2 * (any_running & waiting) + 14 * preemptible, [&] { decide(&gen_preempt); }},
      {1 + 14 * has(JobState::kCheckpointing) + 14 * movable + 2 * stuck,
       [&] { decide(&gen_checkpoint_done); }},
      {1 + 3 * has(JobState::kSuspended) + 16 * resumable + 4 * trespass_resume +
           10 * owner_resumable + 6 * override_resume,
       [&] { decide([](const RefModel& mm) { return gen_acquire(mm, EventKind::kResume); }); }},
      {1 + 12 * has(JobState::kRestoring), [&] { decide(&gen_restore_done); }},
      {1 + 3 * in_flight + 10 * stuck, [&] { decide(&gen_abort); }},
      {1 + 5 * any_running + 3 * trespass_running, [&] { decide(&gen_migrate); }},
      {1 + 14 * growable + 3 * trespass_running + 12 * worn_growable,
       [&] { decide(&gen_resize_up); }},
      {1 + 20 * shrinkable + 12 * worn_shrinkable, [&] { decide(&gen_resize_down); }},
      {1 + 2 * any_running, [&] { decide(&gen_complete); }},
      {1 + 2 * holding + 4 * climbing + 16 * !veterans.empty() + 24 * resizing_veterans,
       [&] { decide(&gen_worker_crash); }},
      {1 + 1 * holding + 16 * !veterans.empty(),
       [&] {
         step.kind = Step::Kind::kNodeLoss;
         // Mostly a node of a veteran's (see veteran()), when there is one; else any node.
         if (!veterans.empty() && uniform(0, 3) != 0) {
           const auto& held = m.jobs[*rc::gen::elementOf(veterans)].devices;
           step.node = m.dev_node[*rc::gen::elementOf(std::vector<int>(held.begin(), held.end()))];
         } else {
           step.node = uniform(0, m.num_nodes());
         }
         step.origin = pick_origin(EventKind::kNodeLoss);
       }},
      {2 + 2 * reservations, [&] { decide(&gen_cancel); }},
      {1 + 3 * reservations, [&] { decide(&gen_release); }},
      {1 + 6 * retypable, [&] { decide(&gen_retype); }},
      {2,
       [&] {
         step.kind = Step::Kind::kClock;
         step.ms = uniform<std::int64_t>(-5, 5000);
       }},
  };
  int total = 0;
  for (const auto& [w, make] : table) total += w;
  int r = uniform(0, total);
  for (const auto& [w, make] : table) {
    if (r < w) {
      make();
      return step;
    }
    r -= w;
  }
  return step;  // unreachable: r < total
}

std::optional<long> count_from_env(const char* name, long dflt) {
  const char* env = std::getenv(name);
  if (!env || !*env) return dflt;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 1) {
    std::cerr << name << " must be a positive integer, got '" << env << "'\n";
    return std::nullopt;
  }
  return n;
}

}  // namespace orrery::proptest
