#include "core/scheduler_core.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

#include "core/row_desc.h"
#include "spec/invariants.h"

namespace orrery::core {

namespace {

using Concrete = spec::Concrete;

// The rows of the lifecycle table by (source state, event), in table order.
using RowIndex = std::array<std::array<std::vector<const RowDesc<Concrete>*>, spec::kNumEventKinds>,
                            spec::kNumJobStates>;
const RowIndex& rows_by_source_and_event() {
  static const RowIndex index = [] {
    RowIndex idx;
    for (const auto& r : job_rows())
      idx[static_cast<std::size_t>(r.src)][static_cast<std::size_t>(r.event)].push_back(&r);
    return idx;
  }();
  return index;
}

std::string failed_clauses(const spec::Clauses<Concrete>& cs) {
  std::string s;
  for (const auto& c : cs)
    if (!c.holds) s += (s.empty() ? "" : "; ") + std::string(c.name);
  return s;
}

}  // namespace

Result<Fleet> fleet_of_journal(const std::vector<std::string>& records) {
  if (records.empty()) return Status::Error("journal has no fleet record (no records at all)");
  auto first = decode_record(records[0]);
  if (!first) return Status::Error("journal record 1: " + first.reason());
  if (first->kind != RecordKind::kFleet)
    return Status::Error("journal record 1 is not the fleet record");
  auto fleet = Fleet::parse(first->fleet_text);
  if (!fleet) return Status::Error("journal record 1: " + fleet.reason());
  return fleet;
}

SchedulerCore::SchedulerCore(Fleet fleet, const Clock& clock, JournalWriter* journal)
    : fleet_(std::move(fleet)), clock_(clock), journal_(journal), cluster_(fleet_.empty_cluster()) {}

Result<std::unique_ptr<SchedulerCore>> SchedulerCore::create(Fleet fleet, const Clock& clock,
                                                            JournalWriter* journal) {
  if (journal) {
    if (journal->records() != 0)
      return Status::Error("journal already has records: recover from it instead");
    if (auto st = journal->append(encode_fleet_record(fleet.to_text())); !st) return st;
    if (auto st = journal->flush(); !st) return st;
  }
  return std::unique_ptr<SchedulerCore>(new SchedulerCore(std::move(fleet), clock, journal));
}

Result<Committed> SchedulerCore::commit(const Decision& decision) {
  auto r = apply(decision, clock_.now_ms(), /*journaled=*/false);
  if (!r) ++rejected_;
  return r;
}

Result<std::pair<Committed, Decision>> SchedulerCore::replay_one(const std::string& record,
                                                                std::uint64_t index) {
  auto rec = decode_record(record);
  if (!rec) return Status::Error("journal record " + std::to_string(index) + ": " + rec.reason());
  if (rec->kind == RecordKind::kNode) {
    auto c = apply_node(rec->node, rec->time_ms, /*journaled=*/true);
    if (!c)
      return Status::Error("journal record " + std::to_string(index) + " (" +
                           rec->node.describe() + ") does not replay: " + c.reason());
    return std::pair{*c, Decision{}};
  }
  if (rec->kind != RecordKind::kDecision)
    return Status::Error("journal record " + std::to_string(index) + ": a second fleet record");
  auto c = apply(rec->decision, rec->time_ms, /*journaled=*/true);
  if (!c)
    return Status::Error("journal record " + std::to_string(index) + " (" +
                         rec->decision.describe() + ") does not replay: " + c.reason());
  return std::pair{*c, rec->decision};
}

Result<spec::Params<Concrete>> SchedulerCore::params_for(const Decision& d) const {
  const int m = cluster_.num_devices();
  spec::Params<Concrete> p{};
  p.tier = static_cast<std::int64_t>(d.tier);
  p.dtype = 0;
  const bool list = d.event == spec::EventKind::kSubmit && d.device_type.find('|') != std::string::npos;
  if (list) {  // the first of the types the spec allows
    auto ids = fleet_.type_ids(d.device_type);
    if (!ids) return ids.status();
    p.dtype = ids->front();
  } else if (d.event == spec::EventKind::kSubmit || d.event == spec::EventKind::kRetype) {
    p.dtype = fleet_.type_id(d.device_type);  // a Retype's: one of them (allowed_by_spec)
    if (p.dtype < 0) return Status::Error("the fleet has no device of type '" + d.device_type + "'");
  }
  p.world = d.world;
  p.min_dev = d.min_devices;
  p.max_dev = d.max_devices;
  p.mem = d.mem_mib;
  p.step = d.step;
  p.gpu_ms = d.gpu_ms;
  p.splice = d.splice;
  p.beneficiary = d.beneficiary;
  p.mode = static_cast<std::int64_t>(d.mode);
  p.op = d.origin == spec::Origin::kOperator ? 1 : 0;  // never the decision's own claim
  p.sel.reserve(d.devices.size());
  for (auto dev : d.devices) {
    if (dev < 0 || dev >= m)
      return Status::Error("device " + std::to_string(dev) + " is not in the fleet (0.." +
                           std::to_string(m - 1) + ")");
    p.sel.push_back(static_cast<std::int32_t>(dev));
  }
  std::sort(p.sel.begin(), p.sel.end());
  if (auto dup = std::adjacent_find(p.sel.begin(), p.sel.end()); dup != p.sel.end())
    return Status::Error("device " + std::to_string(*dup) + " listed twice");
  return p;
}

const RowDesc<Concrete>* SchedulerCore::find_row(int j, spec::EventKind event,
                                                 const spec::Params<Concrete>& p,
                                                 std::string* why) const {
  const Concrete dom;
  const auto from = static_cast<spec::JobState>(cluster_.jobs[j].state);
  std::string failed;
  for (const auto* r : rows_by_source_and_event()[static_cast<std::size_t>(from)]
                                                 [static_cast<std::size_t>(event)]) {
    if (!r->guard) return r;
    auto cs = r->guard(dom, cluster_, j, p);
    if (spec::all_of(dom, cs)) return r;
    if (why) failed += (failed.empty() ? "" : " | ") + std::string(r->guard_name) + ": " + failed_clauses(cs);
  }
  if (why) {
    std::string what = std::string(spec::event_name(event)) + " for job " + std::to_string(j) +
                       " in state " + std::string(spec::state_name(from));
    *why = failed.empty() ? "no transition: " + what : "rejected " + what + ": " + failed;
  }
  return nullptr;
}

bool SchedulerCore::allows_type(int job, int type) const {
  const auto& types = info_[static_cast<std::size_t>(job)].types;
  if (types.empty()) return cluster_.jobs[job].dtype == type;
  return std::find(types.begin(), types.end(), type) != types.end();
}

// The core's own part of a Retype (the spec's is GuardRetype): the type is one the job's spec
// allows.
Status SchedulerCore::allowed_by_spec(const Decision& d, const spec::Params<Concrete>& p) const {
  if (d.event != spec::EventKind::kRetype || allows_type(static_cast<int>(d.job), static_cast<int>(p.dtype)))
    return Status::Ok();
  const auto& types = info_[static_cast<std::size_t>(d.job)].types;
  std::string allowed;
  if (types.empty()) allowed = fleet_.device_types[static_cast<std::size_t>(cluster_.jobs[d.job].dtype)];
  for (auto t : types) allowed += (allowed.empty() ? "" : "|") + fleet_.device_types[static_cast<std::size_t>(t)];
  return Status::Error("job " + std::to_string(d.job) + "'s spec does not allow device type '" + d.device_type +
                       "' (it allows " + allowed + ")");
}

Status SchedulerCore::check(const Decision& d) const {
  if (!spec::may_decide(d.origin, d.event))
    return Status::Error("a " + std::string(spec::origin_name(d.origin)) + " may not decide " +
                         std::string(spec::event_name(d.event)));
  if (d.event == spec::EventKind::kSubmit) return Status::Error("check() does not take a Submit");
  if (d.job < 0 || d.job >= cluster_.num_jobs()) return Status::Error("unknown job " + std::to_string(d.job));
  auto params = params_for(d);
  if (!params) return params.status();
  if (auto st = allowed_by_spec(d, *params); !st.ok()) return st;
  std::string why;
  if (!find_row(static_cast<int>(d.job), d.event, *params, &why)) return Status::Error(why);
  return Status::Ok();
}

bool SchedulerCore::accepts(const Decision& d) const {
  if (!spec::may_decide(d.origin, d.event) || d.event == spec::EventKind::kSubmit) return false;
  if (d.job < 0 || d.job >= cluster_.num_jobs()) return false;
  auto params = params_for(d);
  return params.ok() && allowed_by_spec(d, *params).ok() &&
         find_row(static_cast<int>(d.job), d.event, *params, nullptr) != nullptr;
}

Result<Committed> SchedulerCore::apply(const Decision& d, std::int64_t time_ms, bool journaled) {
  const Concrete dom;

  // 1. Who decided it, the job and the parameters.
  if (!spec::may_decide(d.origin, d.event))
    return Status::Error("a " + std::string(spec::origin_name(d.origin)) + " may not decide " +
                         std::string(spec::event_name(d.event)) +
                         " (planners decide placement and preemption; the runtime reports "
                         "progress, completion and failures)");
  int j;
  bool fresh = d.event == spec::EventKind::kSubmit;
  if (fresh) {
    j = cluster_.num_jobs();
  } else {
    if (d.job < 0 || d.job >= cluster_.num_jobs())
      return Status::Error("unknown job " + std::to_string(d.job));
    j = static_cast<int>(d.job);
  }
  auto params = params_for(d);
  if (!params) return params.status();
  const auto& p = *params;
  if (!fresh)
    if (auto st = allowed_by_spec(d, p); !st.ok()) return st;

  if (fresh) {  // a new slot in state New; removed again if the submission is rejected
    spec::add_job_slot(dom, cluster_);
    // A tenant stays interned even if this Submit is refused: ids stay dense and stable.
    auto [t, added] = tenant_ids_.try_emplace(d.tenant, static_cast<std::int32_t>(tenants_.size()));
    if (added) tenants_.push_back(d.tenant);
    info_.push_back(JobInfo{d.name, t->second, d.mode, d.min_runtime_ms, {}});
    if (d.device_type.find('|') != std::string::npos) {  // params_for checked the list
      const auto ids = fleet_.type_ids(d.device_type);
      info_.back().types.assign(ids->begin(), ids->end());
    }
  }
  auto drop_fresh = [&] {
    if (!fresh) return;
    cluster_.jobs.pop_back();
    info_.pop_back();
  };

  // 2. The row and its guard, on the concrete state.
  const auto from = static_cast<spec::JobState>(cluster_.jobs[j].state);
  std::string why;
  const RowDesc<Concrete>* row = find_row(j, d.event, p, &why);
  if (!row) {
    drop_fresh();
    return Status::Error(why);
  }

  // 3. Journal, then 4. fire.
  if (journal_ && !journaled) {
    if (auto st = journal_->append(encode_decision_record(d, time_ms)); !st) {
      drop_fresh();
      return Status::Error("journal append failed: " + st.reason());
    }
  }
  held_before_.assign(cluster_.jobs[j].held.begin(), cluster_.jobs[j].held.end());
  target_before_.assign(cluster_.jobs[j].target.begin(), cluster_.jobs[j].target.end());
  const auto resv_gen_before = cluster_.jobs[j].resv_gen;
  FireContext ctx{&cluster_, j, &p};
  machine_.position(from);
  auto fired = machine_.fire(d.event, ctx);
  // The guard was just checked on the same state: the machine must take the same row.
  if (!fired.ok() || machine_.state() != row->dst) std::abort();  // a bug, not bad input
  cluster_.jobs[j].state = static_cast<std::int64_t>(machine_.state());
  // Effects change owners and reservations only on devices the job held, holds, or targets (a
  // move's decision reserves its target's new devices without changing what the job holds).
  if (cluster_.jobs[j].held != held_before_) {
    for (auto dev : held_before_) changes_.device(dev);
    for (auto dev : cluster_.jobs[j].held) changes_.device(dev);
  }
  if (cluster_.jobs[j].target != target_before_) {
    for (auto dev : target_before_) changes_.device(dev);
    for (auto dev : cluster_.jobs[j].target) changes_.device(dev);
  }
  if (cluster_.jobs[j].resv_gen != resv_gen_before) changes_.job(j);
  Committed c = count_committed(time_ms, row->index);
  c.job = j;
  c.from = from;
  c.to = row->dst;
  return c;
}

int SchedulerCore::node_id(const std::string& name) const {
  for (std::size_t n = 0; n < fleet_.nodes.size(); ++n)
    if (fleet_.nodes[n].name == name) return static_cast<int>(n);
  return -1;
}

Result<Committed> SchedulerCore::commit_node(const NodeDecision& decision) {
  auto r = apply_node(decision, clock_.now_ms(), /*journaled=*/false);
  if (!r) ++rejected_;
  return r;
}

Result<Committed> SchedulerCore::apply_node(const NodeDecision& d, std::int64_t time_ms,
                                            bool journaled) {
  const Concrete dom;
  if (!spec::may_decide_node(d.origin, d.event))
    return Status::Error("a " + std::string(spec::origin_name(d.origin)) + " may not decide " +
                         std::string(spec::node_event_name(d.event)) +
                         " (operators drain and undrain; the runtime reports registrations, "
                         "heartbeat loss and failover)");
  if (d.node < 0 || d.node >= cluster_.nodes)
    return Status::Error("unknown node " + std::to_string(d.node));
  const int n = static_cast<int>(d.node);
  const auto from = node_state(n);
  const NodeRowDesc<Concrete>* row = nullptr;
  std::string why;
  for (const auto& r : node_rows()) {
    if (r.src != from || r.event != d.event) continue;
    if (r.guard) {
      auto cs = r.guard(dom, cluster_, n);
      if (!spec::all_of(dom, cs)) {
        why += (why.empty() ? "" : " | ") + std::string(r.guard_name) + ": " + failed_clauses(cs);
        continue;
      }
    }
    row = &r;
    break;
  }
  const std::string what = std::string(spec::node_event_name(d.event)) + " for node " +
                           fleet_.nodes[n].name + " in state " +
                           std::string(spec::node_state_name(from));
  if (!row) {
    if (why.empty()) return Status::Error("no transition: " + what);
    return Status::Error("rejected " + what + ": " + why);
  }
  if (journal_ && !journaled) {
    if (auto st = journal_->append(encode_node_record(d, time_ms)); !st)
      return Status::Error("journal append failed: " + st.reason());
  }
  NodeFireContext ctx{&cluster_, n};
  node_machine_.position(from);
  auto fired = node_machine_.fire(d.event, ctx);
  if (!fired.ok() || node_machine_.state() != row->dst) std::abort();  // a bug, not bad input
  cluster_.node_state[n] = static_cast<std::int64_t>(node_machine_.state());
  changes_.node(n);
  Committed c = count_committed(time_ms, row->index);
  c.node = n;
  c.node_from = from;
  c.node_to = row->dst;
  return c;
}

Committed SchedulerCore::count_committed(std::int64_t time_ms, int row) {
  ++committed_;
  Committed c;
  c.seq = committed_;
  c.time_ms = time_ms;
  c.row = row;
  c.durable = durable_seq() >= committed_;
  return c;
}

// The journal holds the fleet record, then one record per committed decision, so decision `seq` is
// journal record seq + 1.
std::uint64_t SchedulerCore::durable_seq() const {
  if (!journal_) return 0;
  auto durable = journal_->durable_records();
  return durable > 0 ? std::min<std::uint64_t>(durable - 1, committed_) : 0;
}

Status SchedulerCore::sync() {
  if (!journal_) return Status::Ok();
  return journal_->flush();
}

}  // namespace orrery::core
