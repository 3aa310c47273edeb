#include "checker/id_order.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <set>

#include "spec/invariants.h"

namespace orrery::checker {

namespace {

using Plain = spec::ClusterVars<spec::Concrete>;
using PlainParams = spec::Params<spec::Concrete>;

// ---- Clusters of plain values, and their copies in one evaluation's domain ---------------------

// Every value of a cluster (state and fleet) and every device set, in a fixed order.
template <class D>
std::vector<typename D::Int*> int_refs(spec::ClusterVars<D>& s) {
  std::vector<typename D::Int*> out;
  spec::for_each_state_var<D>(
      s, [&](const std::string&, typename D::Int& v) { out.push_back(&v); },
      [&](const std::string&, typename D::DevSet&) {});
  for (auto* fleet : {&s.group_type, &s.group_mem, &s.node_devs, &s.host_mem, &s.premium_reserve})
    for (auto& v : *fleet) out.push_back(&v);
  return out;
}

template <class D>
std::vector<typename D::DevSet*> set_refs(spec::ClusterVars<D>& s) {
  std::vector<typename D::DevSet*> out;
  spec::for_each_state_var<D>(
      s, [&](const std::string&, typename D::Int&) {},
      [&](const std::string&, typename D::DevSet& set) { out.push_back(&set); });
  return out;
}

// The per-device owner and reservation and every job's beneficiary hold job ids.
void mark_ids(const IdOrderDomain& d, const OrdCluster& s) {
  for (const auto& v : s.owner) d.log->mark_id(v.cls);
  for (const auto& v : s.resv_for) d.log->mark_id(v.cls);
  for (const auto& job : s.jobs) d.log->mark_id(job.ben.cls);
}

// The plain cluster in d's domain: every value a class of its own, the ids marked.
OrdCluster to_ord(const IdOrderDomain& d, const Plain& plain) {
  Plain src = plain;  // for_each_state_var wants a mutable cluster
  OrdCluster s;
  s.group_first = src.group_first;
  s.group_node = src.group_node;
  s.nodes = src.nodes;
  s.group_type.assign(src.group_type.size(), d.k(0));
  s.group_mem.assign(src.group_mem.size(), d.k(0));
  s.node_devs.assign(src.node_devs.size(), d.k(0));
  s.host_mem.assign(src.host_mem.size(), d.k(0));
  s.premium_reserve.assign(1, d.k(0));
  spec::clear_state(d, s);
  for (int j = 0; j < src.num_jobs(); ++j) spec::add_job_slot(d, s);
  auto from = int_refs(src);
  auto to = int_refs(s);
  for (std::size_t i = 0; i < from.size(); ++i) *to[i] = d.k(*from[i]);
  auto from_sets = set_refs(src);
  auto to_sets = set_refs(s);
  for (std::size_t i = 0; i < from_sets.size(); ++i) {
    auto& mask = *to_sets[i];
    mask.assign(static_cast<std::size_t>(s.num_devices()), d.b(false));
    for (auto dev : *from_sets[i]) mask[static_cast<std::size_t>(dev)] = d.b(true);
  }
  mark_ids(d, s);
  return s;
}

// The values of an evaluated cluster, as a plain one.
Plain to_plain(const Plain& shape, OrdCluster ord) {
  Plain s = shape;
  auto from = int_refs(ord);
  auto to = int_refs(s);
  for (std::size_t i = 0; i < from.size(); ++i) *to[i] = from[i]->v;
  auto from_sets = set_refs(ord);
  auto to_sets = set_refs(s);
  for (std::size_t i = 0; i < from_sets.size(); ++i) {
    to_sets[i]->clear();
    for (std::size_t dev = 0; dev < from_sets[i]->size(); ++dev)
      if ((*from_sets[i])[dev].v) to_sets[i]->push_back(static_cast<std::int32_t>(dev));
  }
  return s;
}

OrdParams to_ord(const IdOrderDomain& d, const PlainParams& p, int devices) {
  OrdParams q{d.k(p.tier),   d.k(p.dtype),  d.k(p.world),  d.k(p.min_dev), d.k(p.max_dev),
              d.k(p.mem),    d.k(p.step),   d.k(p.gpu_ms), d.k(p.splice),  d.k(p.beneficiary),
              d.k(p.mode),   d.k(p.op),     d.no_devices(devices)};
  for (auto dev : p.sel) q.sel[static_cast<std::size_t>(dev)] = d.b(true);
  d.log->mark_id(q.beneficiary.cls);
  return q;
}

// ---- The clusters the formulas are evaluated on -----------------------------------------------

using spec::JobState;
using spec::NodeState;

std::int64_t v(JobState st) { return static_cast<std::int64_t>(st); }
std::int64_t v(NodeState st) { return static_cast<std::int64_t>(st); }

// A cluster of `shape` with every value set, jobs in several states. `variant` picks one of two
// such clusters. (The verdict does not depend on the values: see id_order_domain.h.)
Plain make_plain(const Shape& shape, int variant) {
  spec::Concrete c;
  Plain s;
  for (int n = 0; n < shape.nodes; ++n)
    for (int k = 0; k < shape.devices_per_node; ++k) {
      s.group_first.push_back(static_cast<int>(s.group_node.size()));
      s.group_node.push_back(n);
    }
  s.group_first.push_back(static_cast<int>(s.group_node.size()));
  s.nodes = shape.nodes;
  const int m = s.num_devices();
  for (int dev = 0; dev < m; ++dev) {
    s.group_type.push_back(1);
    s.group_mem.push_back(1000);
  }
  for (int n = 0; n < shape.nodes; ++n) {
    s.node_devs.push_back(shape.devices_per_node);
    s.host_mem.push_back(10000);
  }
  s.premium_reserve.push_back(m / 2);
  spec::clear_state(c, s);
  for (int n = 0; n < shape.nodes; ++n)
    s.node_state[n] = v(n % 2 == variant ? NodeState::kUp : NodeState::kDraining);
  static constexpr JobState kStates[2][4] = {
      {JobState::kRunning, JobState::kQueued, JobState::kResizing, JobState::kSuspended},
      {JobState::kCheckpointing, JobState::kSuspended, JobState::kMigrating, JobState::kRunning}};
  for (int j = 0; j < shape.jobs; ++j) {
    auto& job = s.jobs.emplace_back(spec::new_job(c, m));
    job.state = v(kStates[variant][j % 4]);
    job.tier = j % spec::kNumTiers;
    job.dtype = 1;
    job.world = 4;
    job.min_dev = 1;
    job.max_dev = 4;
    job.mem = 100;
    job.epoch = 2 + j;
    job.progress = 10;
    job.ckpt = 5;
    job.failures = j;
    job.attained = 100 * j;
    job.resv_gen = 1 + j;
  }
  // Job j holds device j (while it is in a holding state), so every job that can hold does.
  for (int j = 0; j < shape.jobs && j < m; ++j) {
    auto& job = s.jobs[j];
    if (!spec::holding_state(c, job.state)) continue;
    job.held = {static_cast<std::int32_t>(j)};
    job.devices = 1;
    job.splice = 4;
    s.owner[j] = j;
    s.owner_epoch[j] = job.epoch;
    s.node_held[s.node_of(j)] += 1;
    s.node_swap[s.node_of(j)] += 3 * job.mem;
    if (spec::moving_state(c, job.state)) {
      job.target = {static_cast<std::int32_t>(j)};
      job.tsplice = 4;
      if (m > shape.jobs) {
        job.target.push_back(static_cast<std::int32_t>(m - 1));
        job.tsplice = 2;
        s.resv_for[m - 1] = j;
        s.resv_gen[m - 1] = job.resv_gen;
      }
    }
    if (job.state == v(JobState::kCheckpointing) || job.state == v(JobState::kResizing))
      job.ben = (j + 1) % shape.jobs;
  }
  return s;
}

PlainParams make_plain_params(const Plain& s, int variant) {
  PlainParams p{};
  p.tier = variant;
  p.dtype = 1;
  p.world = 4;
  p.min_dev = 1;
  p.max_dev = 4;
  p.mem = 100;
  p.step = 10;
  p.gpu_ms = 50;
  p.splice = 2;
  p.mode = variant % spec::kNumPreemptions;
  p.op = variant % 2;
  p.beneficiary = (variant + 1) % std::max(1, s.num_jobs());
  for (int dev = 0; dev < std::min(2, s.num_devices()); ++dev)
    p.sel.push_back(static_cast<std::int32_t>(dev));
  return p;
}

// ---- The check ---------------------------------------------------------------------------------

class Checker {
 public:
  explicit Checker(IdOrderReport& r) : r_(r) {}

  // Runs `eval(d)` in a fresh domain and records a violation under `what`.
  template <class Eval>
  void run(const std::string& what, int jobs, Eval&& eval) {
    IdOrderLog log;
    IdOrderDomain d{&log, jobs};
    eval(d);
    ++r_.formulas;
    if (const char* op = log.violation()) {
      auto line = what + ": a job id takes part in `" + op + "`";
      if (seen_.insert(line).second) r_.violations.push_back(line);
    }
  }

 private:
  IdOrderReport& r_;
  std::set<std::string> seen_;
};

std::string acting(int j) { return " (job " + std::to_string(j) + " acting)"; }

// ---- Renaming the jobs ----------------------------------------------------------------------
//
// What ORDER's domain cannot see is plain C++ on slot indices (`s.jobs[0]`, `i < j`). So, second,
// every formula must commute with renaming the jobs: on random clusters (values anywhere, garbage
// ids included), with the jobs renamed by a permutation pi (slots moved, every id in [0, jobs)
// mapped, other values kept), a guard's clauses, an invariant's value and a step invariant's
// value are unchanged, and an effect's state after is the renamed state after.

using Perm = std::vector<int>;

std::int64_t rename_id(const Perm& pi, std::int64_t id) {
  return id >= 0 && id < static_cast<std::int64_t>(pi.size()) ? pi[static_cast<std::size_t>(id)]
                                                                : id;
}

Plain renamed(const Plain& s, const Perm& pi) {
  Plain r = s;
  for (std::size_t i = 0; i < pi.size(); ++i) {
    auto& job = r.jobs[static_cast<std::size_t>(pi[i])];
    job = s.jobs[i];
    job.ben = rename_id(pi, job.ben);
  }
  for (auto& v : r.owner) v = rename_id(pi, v);
  for (auto& v : r.resv_for) v = rename_id(pi, v);
  return r;
}

PlainParams renamed(const PlainParams& p, const Perm& pi) {
  PlainParams r = p;
  r.beneficiary = rename_id(pi, p.beneficiary);
  return r;
}

bool same(Plain a, Plain b) {
  auto x = int_refs(a);
  auto y = int_refs(b);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (*x[i] != *y[i]) return false;
  auto xs = set_refs(a);
  auto ys = set_refs(b);
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (*xs[i] != *ys[i]) return false;
  return true;
}

std::string perm_text(const Perm& pi) {
  std::string t = "renaming the jobs";
  for (std::size_t i = 0; i < pi.size(); ++i)
    t += (i ? ", " : " ") + std::to_string(i) + "->" + std::to_string(pi[i]);
  return t;
}

// A cluster of `shape` with random values: small numbers, ids of jobs, -1, and ids of no job.
Plain random_plain(const Shape& shape, std::mt19937_64& rng) {
  Plain s = make_plain(shape, 0);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t jobs = s.num_jobs();
  for (auto* v : int_refs(s)) *v = pick(-1, 9);
  for (auto& v : s.owner) v = pick(-1, jobs);
  for (auto& v : s.resv_for) v = pick(-1, jobs);
  for (auto& n : s.node_state) n = pick(0, spec::kNumNodeStates - 1);
  for (auto& job : s.jobs) {
    job.state = pick(0, spec::kNumJobStates - 1);
    job.tier = pick(0, spec::kNumTiers - 1);
    job.ben = pick(-1, jobs);
  }
  for (auto* set : set_refs(s)) {
    set->clear();
    for (int dev = 0; dev < s.num_devices(); ++dev)
      if (pick(0, 1)) set->push_back(dev);
  }
  return s;
}

PlainParams random_params(const Plain& s, std::mt19937_64& rng) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  PlainParams p{};
  for (auto* v : {&p.tier, &p.dtype, &p.world, &p.min_dev, &p.max_dev, &p.mem, &p.step, &p.gpu_ms,
                  &p.splice, &p.mode, &p.op})
    *v = pick(-1, 9);
  p.beneficiary = pick(-1, s.num_jobs());
  for (int dev = 0; dev < s.num_devices(); ++dev)
    if (pick(0, 1)) p.sel.push_back(dev);
  return p;
}

// The values of a guard's clauses.
std::vector<bool> clause_values(const OrdRow& row, const Plain& s, int j, const PlainParams& p) {
  IdOrderLog log;
  IdOrderDomain d{&log, s.num_jobs()};
  auto x = to_ord(d, s);
  std::vector<bool> out;
  for (const auto& c : row.guard(d, x, j, to_ord(d, p, s.num_devices()))) out.push_back(c.holds.v);
  return out;
}

Plain after(const OrdRow& row, const Plain& s, int j, const PlainParams& p) {
  IdOrderLog log;
  IdOrderDomain d{&log, s.num_jobs()};
  auto x = to_ord(d, s);
  if (row.effect) row.effect(d, x, j, to_ord(d, p, s.num_devices()));
  x.jobs[static_cast<std::size_t>(j)].state = d.k(v(row.dst));
  return to_plain(s, x);
}

// Every invariant's value, whole and by parts, and every step invariant's and DELTA's over pre ->
// post (job j acting).
std::vector<bool> invariant_values(const Plain& pre, int j, const PlainParams& p,
                                   const Plain& post) {
  IdOrderLog log;
  IdOrderDomain d{&log, pre.num_jobs()};
  auto a = to_ord(d, pre);
  auto b = to_ord(d, post);
  auto q = to_ord(d, p, pre.num_devices());
  std::vector<bool> out;
  for (auto inv : spec::kAllInvariants) {
    out.push_back(spec::state_invariant(d, inv, b).v);
    out.push_back(spec::step_invariant(d, inv, a, j, q, b).v);
  }
  out.push_back(spec::counters_follow_shares(d, a, j, b).v);
  return out;
}

void check_renaming(const std::vector<OrdRow>& rows, const std::vector<OrdNodeRow>& node_rows,
                    const Shape& shape, IdOrderReport& report, std::set<std::string>& seen) {
  if (shape.jobs < 2) return;
  // A transposition and a rotation of the job slots (together they generate every renaming).
  Perm swap01(static_cast<std::size_t>(shape.jobs)), rotate(swap01.size());
  for (int i = 0; i < shape.jobs; ++i) {
    swap01[static_cast<std::size_t>(i)] = i < 2 ? 1 - i : i;
    rotate[static_cast<std::size_t>(i)] = (i + 1) % shape.jobs;
  }
  auto flag = [&](const std::string& line) {
    if (seen.insert(line).second) report.violations.push_back(line);
  };
  // The two clusters of the ORDER part (every job different in tier, epoch, attained, ...) and
  // random ones.
  std::vector<std::pair<Plain, PlainParams>> clusters;
  for (int variant = 0; variant < 2; ++variant) {
    clusters.emplace_back(make_plain(shape, variant), PlainParams{});
    clusters.back().second = make_plain_params(clusters.back().first, variant);
  }
  std::mt19937_64 rng(17);  // fixed: the same clusters every run
  for (int trial = 0; trial < 3; ++trial) {
    auto c = random_plain(shape, rng);
    auto q = random_params(c, rng);
    clusters.emplace_back(std::move(c), std::move(q));
  }
  struct Original {  // a row's guard, effect and invariants on the cluster as it is
    bool done = false;
    std::vector<bool> clauses, invariants;
    Plain post;
  };
  for (const auto& [s, p] : clusters) {
    std::vector<Original> originals(rows.size() * static_cast<std::size_t>(shape.jobs));
    for (const auto& pi : {swap01, rotate}) {
      const Plain rs = renamed(s, pi);
      const PlainParams rp = renamed(p, pi);
      ++report.formulas;
      if (invariant_values(s, 0, p, s) != invariant_values(rs, pi[0], rp, rs))
        flag(perm_text(pi) + " changes an invariant's value");
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const auto& row = rows[r];
        for (int j = 0; j < shape.jobs; ++j) {
          const int rj = pi[static_cast<std::size_t>(j)];
          report.formulas += 3;
          auto& mine = originals[r * static_cast<std::size_t>(shape.jobs) +
                                 static_cast<std::size_t>(j)];
          if (!mine.done) {  // the same for every renaming: computed once
            if (row.guard) mine.clauses = clause_values(row, s, j, p);
            mine.post = after(row, s, j, p);
            mine.invariants = invariant_values(s, j, p, mine.post);
            mine.done = true;
          }
          if (row.guard && mine.clauses != clause_values(row, rs, rj, rp))
            flag(perm_text(pi) + " changes the guard " + std::string(row.guard_name) + " of " +
                 row.label() + acting(j));
          const Plain rpost = after(row, rs, rj, rp);
          if (!same(renamed(mine.post, pi), rpost))
            flag(perm_text(pi) + " changes what the effect " + std::string(row.action_name) +
                 " of " + row.label() + acting(j) + " does");
          else if (mine.invariants != invariant_values(rs, rj, rp, rpost))
            flag(perm_text(pi) + " changes an invariant's value over " + row.label() + acting(j));
        }
      }
      for (const auto& row : node_rows) {
        if (!row.guard) continue;
        for (int n = 0; n < s.nodes; ++n) {
          IdOrderLog l1, l2;
          IdOrderDomain d1{&l1, shape.jobs}, d2{&l2, shape.jobs};
          ++report.formulas;
          if (spec::all_of(d1, row.guard(d1, to_ord(d1, s), n)).v !=
              spec::all_of(d2, row.guard(d2, to_ord(d2, rs), n)).v)
            flag(perm_text(pi) + " changes the guard " + std::string(row.guard_name) + " of " +
                 row.label());
        }
      }
    }
  }
}

}  // namespace

IdOrderReport check_id_order(const std::vector<OrdRow>& rows,
                             const std::vector<OrdNodeRow>& node_rows, const Shape& shape) {
  auto t0 = std::chrono::steady_clock::now();
  IdOrderReport report;
  Checker check(report);
  for (int variant = 0; variant < 2; ++variant) {
    const Plain base = make_plain(shape, variant);
    const PlainParams base_p = make_plain_params(base, variant);
    const int jobs = base.num_jobs();
    const int m = base.num_devices();

    // Every invariant on the cluster, whole and part by part, and the initial state.
    for (auto inv : spec::kAllInvariants) {
      const std::string id(spec::inv_id(inv));
      check.run(id + " (state)", jobs, [&](const IdOrderDomain& d) {
        auto s = to_ord(d, base);
        (void)spec::state_invariant(d, inv, s);
      });
      for (int j = 0; j < jobs; ++j)
        check.run(id + " (job part)", jobs, [&](const IdOrderDomain& d) {
          (void)spec::job_invariant(d, inv, to_ord(d, base), j);
        });
      for (int dev = 0; dev < m; ++dev)
        check.run(id + " (device part)", jobs, [&](const IdOrderDomain& d) {
          (void)spec::device_invariant(d, inv, to_ord(d, base), dev);
        });
      for (int n = 0; n < base.nodes; ++n)
        check.run(id + " (node part)", jobs, [&](const IdOrderDomain& d) {
          (void)spec::node_invariant(d, inv, to_ord(d, base), n);
        });
      check.run(id + " (fleet part)", jobs, [&](const IdOrderDomain& d) {
        (void)spec::fleet_invariant(d, inv, to_ord(d, base));
      });
      check.run(id + " (sums part)", jobs, [&](const IdOrderDomain& d) {
        (void)spec::sums_invariant(d, inv, to_ord(d, base));
      });
    }
    check.run("the initial state", jobs, [&](const IdOrderDomain& d) {
      (void)spec::init_state(d, to_ord(d, base));
    });
    check.run("the fleet's well-formedness", jobs, [&](const IdOrderDomain& d) {
      (void)spec::fleet_wellformed(d, to_ord(d, base));
    });

    // Every row, every acting job: its guard, its effect, and every step invariant and DELTA's
    // counters over the step it makes.
    for (const auto& row : rows) {
      for (int j = 0; j < jobs; ++j) {
        Plain pre = base;
        pre.jobs[j].state = v(row.src);
        if (row.guard)
          check.run("the guard " + std::string(row.guard_name) + " of " + row.label() + acting(j),
                    jobs, [&](const IdOrderDomain& d) {
                      auto s = to_ord(d, pre);
                      auto p = to_ord(d, base_p, m);
                      (void)spec::all_of(d, row.guard(d, s, j, p));
                    });
        Plain post = pre;
        check.run("the effect " + std::string(row.action_name) + " of " + row.label() + acting(j),
                  jobs, [&](const IdOrderDomain& d) {
                    auto s = to_ord(d, pre);
                    auto p = to_ord(d, base_p, m);
                    if (row.effect) row.effect(d, s, j, p);
                    s.jobs[j].state = d.k(v(row.dst));
                    mark_ids(d, s);  // what the effect wrote where ids belong is an id
                    post = to_plain(pre, s);
                  });
        for (auto inv : spec::kAllInvariants) {
          if (!spec::has_step_part(inv)) continue;
          check.run(std::string(spec::inv_id(inv)) + " (step) over " + row.label() + acting(j),
                    jobs, [&](const IdOrderDomain& d) {
                      auto a = to_ord(d, pre);
                      auto b = to_ord(d, post);
                      auto p = to_ord(d, base_p, m);
                      (void)spec::step_invariant(d, inv, a, j, p, b);
                    });
        }
        check.run("DELTA (counters_follow_shares) over " + row.label() + acting(j), jobs,
                  [&](const IdOrderDomain& d) {
                    (void)spec::counters_follow_shares(d, to_ord(d, pre), j, to_ord(d, post));
                  });
        // (The state invariants after the row need no evaluation of their own: in this domain
        // what they do with ids does not depend on the values, and they were evaluated above.)
      }
    }
    // Every node row's guard, for every node.
    for (const auto& row : node_rows) {
      if (!row.guard) continue;
      for (int n = 0; n < base.nodes; ++n)
        check.run("the guard " + std::string(row.guard_name) + " of " + row.label() + " (node " +
                      std::to_string(n) + " acting)",
                  jobs, [&](const IdOrderDomain& d) {
                    auto s = to_ord(d, base);
                    s.node_state[n] = d.k(v(row.src));
                    (void)spec::all_of(d, row.guard(d, s, n));
                  });
    }
  }
  std::set<std::string> renaming_seen;
  check_renaming(rows, node_rows, shape, report, renaming_seen);
  report.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

Obligation id_order_obligation(const IdOrderReport& r) {
  Obligation ob;
  ob.kind = ObligationKind::kIdOrder;
  ob.row = 0;
  ob.row_label = kIdOrderLabel;
  ob.proved = r.ok();
  ob.local = ob.proved;
  ob.ms = r.ms;
  for (const auto& v : r.violations) ob.counterexample += "    " + v + "\n";
  if (!r.ok())
    ob.counterexample +=
        "    job slots are not interchangeable: proving rows with job 0 acting (and the BMC's "
        "slot-order reduction) is unsound\n";
  return ob;
}

}  // namespace orrery::checker
