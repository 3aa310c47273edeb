#include "checker/replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <iterator>
#include <memory>
#include <string_view>
#include <utility>

#include "core/clock.h"
#include "core/decision.h"
#include "core/journal.h"
#include "core/scheduler_core.h"
#include "spec/invariants.h"

namespace orrery::checker {

namespace {

using Concrete = spec::Concrete;
using Cluster = spec::ClusterVars<Concrete>;
using SteadyClock = std::chrono::steady_clock;

// The clock a replayed decision is committed under: the time its record carries.
class RecordClock final : public core::Clock {
 public:
  std::int64_t now_ms() const override { return now_; }
  void set(std::int64_t t) { now_ = t; }

 private:
  std::int64_t now_ = 0;
};

void sort_unique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The first state variable (as the checker names them) in which a and b differ, or "".
std::string first_difference(const Cluster& a, const Cluster& b) {
  if (a.num_jobs() != b.num_jobs()) return "the number of job slots";
  constexpr auto fields = spec::job_fields<Concrete>();
  for (int j = 0; j < a.num_jobs(); ++j) {
    for (const auto& [name, member] : fields)
      if (a.jobs[j].*member != b.jobs[j].*member)
        return "j" + std::to_string(j) + "." + std::string(name);
    if (a.jobs[j].held != b.jobs[j].held) return "j" + std::to_string(j) + ".held";
    if (a.jobs[j].target != b.jobs[j].target) return "j" + std::to_string(j) + ".target";
  }
  auto per = [](const char* what, const std::vector<std::int64_t>& x,
                const std::vector<std::int64_t>& y) -> std::string {
    if (x == y) return "";
    auto at = std::mismatch(x.begin(), x.end(), y.begin()).first - x.begin();
    return std::string(what) + "[" + std::to_string(at) + "]";
  };
  for (auto s : {per("owner", a.owner, b.owner), per("owner_epoch", a.owner_epoch, b.owner_epoch),
                 per("resv_for", a.resv_for, b.resv_for), per("resv_gen", a.resv_gen, b.resv_gen),
                 per("node_state", a.node_state, b.node_state),
                 per("node_held", a.node_held, b.node_held),
                 per("node_swap", a.node_swap, b.node_swap),
                 per("premium_admitted", a.premium_admitted, b.premium_admitted)})
    if (!s.empty()) return s;
  return "";
}

class Replayer {
 public:
  Replayer(ReplayReport& rep, const ReplayOptions& options) : rep_(rep), options_(options) {}

  // The journal's records, in order: the fleet record's payload, then each decision record as
  // core::decode_record made it (decoding may run on another thread, see replay_journal).
  void on_fleet_record(std::string_view payload) {
    ++index_;
    start(payload);
  }
  void on_decision_record(Result<core::DecodedRecord>&& rec) {
    ++index_;
    if (!stopped_) decision(std::move(rec));
  }
  // Past a record that does not replay (or an unreadable fleet) the rest is only counted.
  bool stopped() const { return stopped_; }

  // After the last record: the final full check.
  void finish() {
    if (core_ && last_full_ != rep_.decisions)
      full_check("full check after record " + std::to_string(last_record_));
  }

 private:
  void start(std::string_view payload) {
    auto fleet = core::fleet_of_journal({std::string(payload)});
    if (!fleet) {
      rep_.error = fleet.reason();
      rep_.unreadable = true;
      stopped_ = true;
      return;
    }
    auto core = core::SchedulerCore::create(std::move(*fleet), clock_, nullptr);
    if (!core) {
      rep_.error = "journal record 1: " + core.reason();
      rep_.unreadable = true;
      stopped_ = true;
      return;
    }
    core_ = std::move(*core);
    shadow_ = core_->cluster();
    node_of_.resize(static_cast<std::size_t>(shadow_.num_devices()));
    for (int g = 0; g < shadow_.num_groups(); ++g)
      for (int dev = shadow_.group_first[g]; dev < shadow_.group_first[g + 1]; ++dev)
        node_of_[static_cast<std::size_t>(dev)] = shadow_.group_node[g];
    last_record_ = index_;
    full_check("initial state");
  }

  void decision(Result<core::DecodedRecord>&& rec) {
    auto at = [&] { return "journal record " + std::to_string(index_); };
    if (!rec) return stop(at() + ": " + rec.reason());
    if (rec->kind == core::RecordKind::kNode) return node_decision(rec->node, rec->time_ms);
    if (rec->kind != core::RecordKind::kDecision) return stop(at() + ": a second fleet record");
    const core::Decision& dec = rec->decision;
    clock_.set(rec->time_ms);
    // The parameters and what the decision may change, from the state before it. A decision whose
    // parameters are bad does not commit either (the core computes the same parameters).
    auto params = core_->params_for(dec);
    const bool submit = dec.event == spec::EventKind::kSubmit;
    const bool known = submit || (dec.job >= 0 && dec.job < shadow_.num_jobs());
    if (params && known) {
      const int j = submit ? shadow_.num_jobs() : static_cast<int>(dec.job);
      if (submit) spec::add_job_slot(d_, shadow_);  // the slot it fills
      named_devices(j, dec.event, *params);
      if (!submit) frame_since_sync(j);
    }
    auto c = core_->commit(dec);
    if (!c) {
      if (submit && params) shadow_.jobs.pop_back();  // the slot was not filled after all
      return stop(at() + " (" + dec.describe() + ") does not replay: " + c.reason());
    }
    ++rep_.decisions;
    last_record_ = index_;
    auto where = [&] {
      return "record " + std::to_string(index_) + " (" + dec.describe() + ", " +
             std::string(spec::state_name(c->from)) + " -> " +
             std::string(spec::state_name(c->to)) + ")";
    };
    if (!params || !known) {  // committed all the same: a bug in the core or in this replay
      rep_.violations.push_back(where() + ": the core committed a decision it has no parameters "
                                "or job for");
      shadow_ = core_->cluster();  // nothing to check against: start over from here
    } else {
      if (rep_.decisions % std::max<std::uint64_t>(options_.check_every, 1) == 0) {
        ++rep_.checked_decisions;
        incremental(c->job, *params, where);
      }
      sync_shadow(c->job);
    }
    if (options_.full_every != 0 && rep_.decisions % options_.full_every == 0)
      full_check("full check after record " + std::to_string(index_));
  }

  // A node decision changes node n's state only (FRAME, proved for every node row): the checks are
  // INV-NODE's node part and the device parts of the node's devices, O(the node's devices).
  void node_decision(const core::NodeDecision& dec, std::int64_t time_ms) {
    auto at = [&] { return "journal record " + std::to_string(index_); };
    clock_.set(time_ms);
    auto c = core_->commit_node(dec);
    if (!c) return stop(at() + " (" + dec.describe() + ") does not replay: " + c.reason());
    ++rep_.decisions;
    last_record_ = index_;
    const int n = c->node;
    const Cluster& post = core_->cluster();
    if (rep_.decisions % std::max<std::uint64_t>(options_.check_every, 1) == 0) {
      ++rep_.checked_decisions;
      for (auto inv : spec::kAllInvariants) {
        bool ok = true;
        if (spec::has_node_part(inv)) ok = spec::node_invariant(d_, inv, post, n);
        if (spec::has_device_part(inv))
          spec::for_each_node_device(post, n, [&](int dev) {
            ok = ok && spec::device_invariant(d_, inv, post, dev);
          });
        ++rep_.checks;
        if (!ok)
          rep_.violations.push_back("record " + std::to_string(index_) + " (" + dec.describe() +
                                    ", " + std::string(spec::node_state_name(c->node_from)) +
                                    " -> " + std::string(spec::node_state_name(c->node_to)) +
                                    "): " + std::string(spec::inv_id(inv)) + " (" +
                                    std::string(spec::inv_summary(inv)) + ")");
      }
    }
    shadow_.node_state[n] = post.node_state[n];
    if (options_.full_every != 0 && rep_.decisions % options_.full_every == 0)
      full_check("full check after record " + std::to_string(index_));
  }

  // Before job j's decision commits: what it may change (its variables, the named devices, their
  // nodes' counters, the fleet counter) must still be as the shadow has it. Anything else means an
  // earlier decision changed them outside its own frame (FRAME), which the sync after this decision
  // would otherwise hide from the next full check; the shadow takes the real values, so that this
  // decision is checked against its true state before.
  void frame_since_sync(int j) {
    const Cluster& s = core_->cluster();
    std::string what;
    auto& a = shadow_.jobs[j];
    const auto& b = s.jobs[j];
    constexpr auto fields = spec::job_fields<Concrete>();
    for (const auto& [name, member] : fields)
      if (what.empty() && a.*member != b.*member)
        what = "j" + std::to_string(j) + "." + std::string(name);
    if (what.empty() && a.held != b.held) what = "j" + std::to_string(j) + ".held";
    if (what.empty() && a.target != b.target) what = "j" + std::to_string(j) + ".target";
    if (!what.empty()) a = b;
    for (int dev : named_) {
      const auto d = static_cast<std::size_t>(dev);
      const auto n = static_cast<std::size_t>(node_of_[d]);
      if (shadow_.owner[d] != s.owner[d] || shadow_.owner_epoch[d] != s.owner_epoch[d] ||
          shadow_.resv_for[d] != s.resv_for[d] || shadow_.resv_gen[d] != s.resv_gen[d] ||
          shadow_.node_held[n] != s.node_held[n] || shadow_.node_swap[n] != s.node_swap[n]) {
        if (what.empty()) what = "device " + std::to_string(dev) + " or its node's counters";
        shadow_.owner[d] = s.owner[d];
        shadow_.owner_epoch[d] = s.owner_epoch[d];
        shadow_.resv_for[d] = s.resv_for[d];
        shadow_.resv_gen[d] = s.resv_gen[d];
        shadow_.node_held[n] = s.node_held[n];
        shadow_.node_swap[n] = s.node_swap[n];
      }
    }
    if (shadow_.premium_admitted != s.premium_admitted) {
      if (what.empty()) what = "premium_admitted";
      shadow_.premium_admitted = s.premium_admitted;
    }
    if (!what.empty())
      rep_.violations.push_back("before record " + std::to_string(index_) + ": FRAME (" + what +
                                " changed since the decision that last named it, outside any "
                                "decision's own job and devices)");
  }

  void stop(std::string error) {
    rep_.error = std::move(error);
    stopped_ = true;
  }

  // The checks after one decision, job j acting with parameters p: O(|named devices|).
  template <class Where>
  void incremental(int j, const spec::Params<Concrete>& p, Where&& where) {
    const Cluster& pre = shadow_;
    const Cluster& post = core_->cluster();

    // The checks visit the named devices and those j holds after (a subset, unless FRAME is
    // broken), every job that owned one of them before or after, and their nodes. Held sets are
    // sorted, so this is a merge, not a sort.
    const auto& held_after = post.jobs[j].held;
    devs_.clear();
    if (held_after == named_)  // the common case: a decision that keeps the job's devices
      devs_ = named_;
    else
      std::set_union(named_.begin(), named_.end(), held_after.begin(), held_after.end(),
                     std::back_inserter(devs_));
    jobs_.assign(1, j);
    nodes_.clear();
    for (int dev : devs_) {
      for (auto owner : {pre.owner[dev], post.owner[dev]})
        if (owner != j && owner >= 0 && owner < post.num_jobs())
          jobs_.push_back(static_cast<int>(owner));
      const int n = node_of_[static_cast<std::size_t>(dev)];
      if (nodes_.empty() || nodes_.back() != n) nodes_.push_back(n);
    }
    if (jobs_.size() > 1) sort_unique(jobs_);
    if (nodes_.size() > 1) sort_unique(nodes_);

    for (auto inv : spec::kAllInvariants) {
      bool ok = true;
      if (spec::has_job_part(inv))
        for (int i : jobs_) ok = ok && spec::job_invariant(d_, inv, post, i);
      if (spec::has_device_part(inv))
        for (int dev : devs_) ok = ok && spec::device_invariant(d_, inv, post, dev);
      if (spec::has_node_part(inv))
        for (int n : nodes_) ok = ok && spec::node_invariant(d_, inv, post, n);
      if (spec::has_fleet_part(inv)) ok = ok && spec::fleet_invariant(d_, inv, post);
      // INV-INDEX's sums by DELTA; INV-EXCL's count is implied by INV-INDEX's parts above.
      if (inv == spec::Inv::kIndex) ok = spec::counters_follow_shares(d_, pre, j, post) && ok;
      ++rep_.checks;
      if (!ok)
        rep_.violations.push_back(where() + ": " + std::string(spec::inv_id(inv)) + " (" +
                                  std::string(spec::inv_summary(inv)) + ")");
    }
    for (auto inv : spec::kAllInvariants) {
      if (!spec::has_step_part(inv)) continue;
      bool ok = true;
      for (int i : jobs_) ok = ok && spec::job_step(d_, inv, pre, j, p, post, i);
      if (spec::has_device_step_part(inv)) {
        const auto f = spec::freed_for_step(d_, pre, j, p, post);
        for (int dev : devs_) ok = ok && spec::device_step(d_, inv, pre, j, post, dev, f);
      }
      ++rep_.checks;
      if (!ok)
        rep_.violations.push_back(where() + ": " + std::string(spec::inv_id(inv)) + " (step: " +
                                  std::string(spec::inv_summary(inv)) + ")");
    }
  }

  // What FRAME lets a decision change: job j, the devices it held or targeted and those it
  // selects, and their nodes' counters (named_, from the shadow: the state before the decision).
  void named_devices(int j, spec::EventKind event, const spec::Params<Concrete>& p) {
    const auto& held_before = shadow_.jobs[j].held;
    const auto& target_before = shadow_.jobs[j].target;
    named_.clear();
    if (target_before.empty())
      named_.assign(held_before.begin(), held_before.end());
    else
      std::set_union(held_before.begin(), held_before.end(), target_before.begin(),
                     target_before.end(), std::back_inserter(named_));
    if (spec::selects_devices(event) && !p.sel.empty()) {
      scratch_.clear();
      std::set_union(named_.begin(), named_.end(), p.sel.begin(), p.sel.end(),
                     std::back_inserter(scratch_));
      named_.swap(scratch_);
    }
  }

  // The shadow becomes the state before the next decision: only what FRAME lets change is copied,
  // so a change anywhere else shows at the next full check.
  void sync_shadow(int j) {
    const Cluster& post = core_->cluster();
    shadow_.jobs[j] = post.jobs[j];
    for (int dev : named_) {
      shadow_.owner[dev] = post.owner[dev];
      shadow_.owner_epoch[dev] = post.owner_epoch[dev];
      shadow_.resv_for[dev] = post.resv_for[dev];
      shadow_.resv_gen[dev] = post.resv_gen[dev];
      const int n = node_of_[static_cast<std::size_t>(dev)];
      shadow_.node_held[n] = post.node_held[n];
      shadow_.node_swap[n] = post.node_swap[n];
    }
    shadow_.premium_admitted = post.premium_admitted;
  }

  // Every state invariant over the whole state, and FRAME since the last full check.
  void full_check(const std::string& where) {
    const auto t0 = SteadyClock::now();
    const Cluster& s = core_->cluster();
    const bool initial = rep_.full_checks == 0;
    for (auto inv : spec::kAllInvariants) {
      if (initial) ++rep_.checks;  // see ReplayReport::checks
      if (!spec::state_invariant(d_, inv, s))
        rep_.violations.push_back(where + ": " + std::string(spec::inv_id(inv)) + " (" +
                                  std::string(spec::inv_summary(inv)) + ")");
    }
    if (auto diff = first_difference(shadow_, s); !diff.empty()) {
      rep_.violations.push_back(where + ": FRAME (between records " +
                                std::to_string(last_full_record_ + 1) + " and " +
                                std::to_string(last_record_) + " a decision changed " + diff +
                                ", outside its job and the devices it names)");
      shadow_ = s;
    }
    last_full_ = rep_.decisions;
    last_full_record_ = last_record_;
    ++rep_.full_checks;
    rep_.full_check_seconds += std::chrono::duration<double>(SteadyClock::now() - t0).count();
  }

  ReplayReport& rep_;
  const ReplayOptions options_;
  const Concrete d_{};
  RecordClock clock_;
  std::unique_ptr<core::SchedulerCore> core_;
  Cluster shadow_;  // the state before the next decision, as the checks know it
  std::uint64_t index_ = 0;             // the current record's number (the fleet record is 1)
  std::uint64_t last_record_ = 0;       // the last record replayed
  std::uint64_t last_full_ = 0;         // decisions replayed at the last full check
  std::uint64_t last_full_record_ = 0;  // the record it followed
  bool stopped_ = false;                // a record did not replay: the rest is only counted
  // Scratch, reused from decision to decision.
  std::vector<int> named_, devs_, jobs_, nodes_, scratch_;
  std::vector<int> node_of_;  // device -> node (ClusterVars::node_of without its binary search)
};

// Hands the journal's records to a Replayer: on this thread, or with a second thread reading,
// checksumming and decoding the records while this one commits and checks them (batches of
// kBatch records through a queue of at most kMaxBatches). Returns read_journal's result.
class Feeder {
 public:
  static constexpr std::size_t kBatch = 2048;
  static constexpr std::size_t kMaxBatches = 8;

  Feeder(const std::string& path, Replayer& replayer) : path_(path), replayer_(replayer) {}

  Result<core::JournalContents> run_here() {
    return core::stream_journal(path_, [this](std::string_view payload) {
      ++records_;
      if (records_ == 1) replayer_.on_fleet_record(payload);
      else if (replayer_.stopped()) replayer_.on_decision_record(Status::Error("skipped"));
      else replayer_.on_decision_record(core::decode_record(payload));
      return true;
    });
  }

  Result<core::JournalContents> run_pipelined() {
    std::optional<Result<core::JournalContents>> read;
    std::thread reader([&] {
      Batch batch;
      auto send = [&] {
        std::unique_lock lock(mu_);
        space_.wait(lock, [&] { return queue_.size() < kMaxBatches; });
        queue_.push_back(std::move(batch));
        ready_.notify_one();
        batch = Batch();
        batch.items.reserve(kBatch);
      };
      batch.items.reserve(kBatch);
      try {
        read = core::stream_journal(path_, [&](std::string_view payload) {
          ++records_;
          if (records_ == 1) {
            batch.fleet_payload = std::string(payload);
            batch.has_fleet = true;
          } else if (skip_.load(std::memory_order_relaxed)) {
            batch.items.emplace_back(Status::Error("skipped"));
          } else {
            batch.items.emplace_back(core::decode_record(payload));
          }
          if (batch.items.size() == kBatch) send();
          return true;
        });
      } catch (const std::exception& e) {
        read = Status::Error(std::string("reading the journal: ") + e.what());
      }
      send();
      std::lock_guard lock(mu_);
      done_ = true;
      ready_.notify_one();
    });
    std::exception_ptr failed;
    for (;;) {
      Batch batch;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) break;
        batch = std::move(queue_.front());
        queue_.pop_front();
        space_.notify_one();
      }
      if (failed) continue;  // draining, so that the reader can finish
      try {
        if (batch.has_fleet) replayer_.on_fleet_record(batch.fleet_payload);
        for (auto& item : batch.items) replayer_.on_decision_record(std::move(item));
      } catch (...) {
        failed = std::current_exception();
      }
      if (failed || replayer_.stopped()) skip_.store(true, std::memory_order_relaxed);
    }
    reader.join();
    if (failed) std::rethrow_exception(failed);
    return std::move(*read);
  }

  std::uint64_t records() const { return records_; }

 private:
  struct Batch {
    bool has_fleet = false;
    std::string fleet_payload;
    std::vector<Result<core::DecodedRecord>> items;
  };

  const std::string& path_;
  Replayer& replayer_;
  std::uint64_t records_ = 0;  // written by the reading thread; read after it has been joined
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  bool done_ = false;
  std::atomic<bool> skip_{false};  // the replay stopped: decoding is no longer needed
};

}  // namespace

ReplayReport replay_journal(const std::string& path, const ReplayOptions& options) {
  auto t0 = SteadyClock::now();
  ReplayReport rep;
  rep.full_every = options.full_every;
  Replayer replayer(rep, options);
  Feeder feeder(path, replayer);
  auto contents = options.pipelined ? feeder.run_pipelined() : feeder.run_here();
  rep.records = feeder.records();
  if (!contents) {
    // Unreadable, a bad header, or damage in the middle. Damage is found only when the scan
    // reaches it, after the records before it were replayed; as with read_journal, such a journal
    // is unreadable as a whole and nothing of it is reported as replayed.
    const std::uint64_t full_every = rep.full_every;
    rep = ReplayReport();
    rep.full_every = full_every;
    rep.error = contents.reason();
    rep.unreadable = true;
    rep.ok = false;
    rep.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    return rep;
  } else {
    rep.clean_tail = contents->clean;
    rep.tail_error = contents->tail_error;
    if (rep.records == 0 && rep.error.empty()) {
      rep.error = "journal has no fleet record (no records at all)";
      rep.unreadable = true;
    }
  }
  replayer.finish();
  rep.ok = rep.error.empty() && rep.violations.empty();
  rep.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return rep;
}

}  // namespace orrery::checker
