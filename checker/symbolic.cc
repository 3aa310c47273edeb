#include "checker/symbolic.h"

#include <sstream>

#include "spec/invariants.h"


namespace orrery::checker {

namespace {

// The model's value, exactly (solver integers are unbounded: print the numeral, not an int64).
std::string value_of(z3::model& m, const z3::expr& e) {
  auto v = m.eval(e, true);
  return v.is_numeral() ? v.get_decimal_string(0) : v.to_string();
}

std::int64_t small_value_of(z3::model& m, const z3::expr& e) {
  std::int64_t out = -1;
  m.eval(e, true).is_numeral_i64(out);
  return out;
}

bool truth_of(z3::model& m, const z3::expr& e) { return m.eval(e, true).is_true(); }

}  // namespace

SymCluster make_cluster(const Z3Domain& d, const Shape& shape, const std::string& prefix,
                        const SymCluster* shared_fleet) {
  auto& c = *d.ctx;
  SymCluster s;
  // One group per device, so that every device has its own symbolic type and memory.
  for (int n = 0; n < shape.nodes; ++n)
    for (int k = 0; k < shape.devices_per_node; ++k) {
      s.group_first.push_back(static_cast<int>(s.group_node.size()));
      s.group_node.push_back(n);
    }
  s.group_first.push_back(static_cast<int>(s.group_node.size()));
  s.nodes = shape.nodes;
  const int m = s.num_devices();
  if (shared_fleet) {
    s.group_type = shared_fleet->group_type;
    s.group_mem = shared_fleet->group_mem;
    s.node_devs = shared_fleet->node_devs;
    s.host_mem = shared_fleet->host_mem;
    s.premium_reserve = shared_fleet->premium_reserve;
  } else {
    for (int dev = 0; dev < m; ++dev)
      s.group_type.push_back(c.int_const(("dev_type[" + std::to_string(dev) + "]").c_str()));
    for (int dev = 0; dev < m; ++dev)
      s.group_mem.push_back(c.int_const(("dev_mem[" + std::to_string(dev) + "]").c_str()));
    for (int n = 0; n < shape.nodes; ++n) {
      s.node_devs.push_back(c.int_const(("node_devs[" + std::to_string(n) + "]").c_str()));
      s.host_mem.push_back(c.int_const(("host_mem[" + std::to_string(n) + "]").c_str()));
    }
    s.premium_reserve.push_back(c.int_const("premium_reserve"));
  }
  spec::clear_state(d, s);
  for (int j = 0; j < shape.jobs; ++j) spec::add_job_slot(d, s);
  // Every state variable a fresh constant (the placeholders above only give the shape).
  spec::for_each_state_var<Z3Domain>(
      s, [&](const std::string& name, z3::expr& v) { v = c.int_const((prefix + name).c_str()); },
      [&](const std::string& name, Z3Domain::DevSet& set) {
        for (int dev = 0; dev < m; ++dev)
          set[dev] = c.bool_const((prefix + name + "[" + std::to_string(dev) + "]").c_str());
      });
  return s;
}

std::vector<z3::expr*> state_refs(SymCluster& s) {
  std::vector<z3::expr*> out;
  spec::for_each_state_var<Z3Domain>(
      s, [&](const std::string&, z3::expr& v) { out.push_back(&v); },
      [&](const std::string&, Z3Domain::DevSet& set) {
        for (auto& in : set) out.push_back(&in);
      });
  return out;
}

SymParams make_params(const Z3Domain& d, int devices, const std::string& prefix) {
  auto& c = *d.ctx;
  auto v = [&](const char* n) { return c.int_const((prefix + n).c_str()); };
  SymParams p{v("tier"),   v("dtype"),  v("world"), v("min_dev"), v("max_dev"),
              v("mem"),    v("step"),   v("gpu_ms"), v("splice"), v("beneficiary"), v("mode"),
              v("op"),     {}};
  for (int dev = 0; dev < devices; ++dev)
    p.sel.push_back(c.bool_const((prefix + "sel[" + std::to_string(dev) + "]").c_str()));
  return p;
}

SymCluster fire(const Z3Domain& d, const SymRow& row, const SymCluster& pre, int j,
                const SymParams& p) {
  SymCluster post = pre;
  if (row.effect) row.effect(d, post, j, p);
  post.jobs[j].state = d.k(static_cast<std::int64_t>(row.dst));
  return post;
}

SymCluster fire_node(const Z3Domain& d, const NodeSymRow& row, const SymCluster& pre, int n) {
  SymCluster post = pre;
  post.node_state[n] = d.k(static_cast<std::int64_t>(row.dst));
  return post;
}

std::string show_node_event(const NodeSymRow& row, int n) {
  return std::string(spec::node_event_name(row.event)) + " node" + std::to_string(n) +
         "  via " + row.label();
}

std::string show_job(z3::model& m, const SymCluster& s, int j) {
  std::ostringstream out;
  const auto& job = s.jobs[j];
  auto st = small_value_of(m, job.state);
  out << "job" << j << " " << spec::state_name(static_cast<spec::JobState>(st));
  if (st == static_cast<std::int64_t>(spec::JobState::kNew)) return out.str();
  auto tier = small_value_of(m, job.tier);
  out << " " << ((tier >= 0 && tier < spec::kNumTiers) ? spec::tier_name(static_cast<spec::Tier>(tier))
                                                        : "tier?" + std::to_string(tier));
  constexpr auto fields = spec::job_fields<Z3Domain>();
  for (const auto& [name, member] : fields) {
    if (name == "state" || name == "tier") continue;
    out << " " << name << "=" << value_of(m, job.*member);
  }
  auto set = [&](const char* what, const Z3Domain::DevSet& devs) {
    out << " " << what << "={";
    bool first = true;
    for (int dev = 0; dev < s.num_devices(); ++dev) {
      if (!truth_of(m, devs[dev])) continue;
      out << (first ? "" : ",") << "d" << dev;
      first = false;
    }
    out << "}";
  };
  set("holds", job.held);
  set("target", job.target);
  return out.str();
}

std::string show_cluster(z3::model& m, const SymCluster& s) {
  std::ostringstream out;
  out << "fleet: reserve=" << value_of(m, s.reserve()) << " premium_admitted="
      << value_of(m, s.premium_admitted.front());
  for (int n = 0; n < s.nodes; ++n)
    out << " node" << n << "{"
        << spec::node_state_name(static_cast<spec::NodeState>(small_value_of(m, s.node_state[n])))
        << " host_mem=" << value_of(m, s.host_mem[n])
        << " held=" << value_of(m, s.node_held[n]) << " swap=" << value_of(m, s.node_swap[n])
        << "}";
  out << "\n      devices:";
  for (int dev = 0; dev < s.num_devices(); ++dev) {
    out << " d" << dev << "{type=" << value_of(m, s.dev_type(dev))
        << " mem=" << value_of(m, s.dev_mem(dev));
    auto owner = value_of(m, s.owner[dev]);
    if (owner != "-1") out << " owner=job" << owner << "@" << value_of(m, s.owner_epoch[dev]);
    auto resv = value_of(m, s.resv_for[dev]);
    if (resv != "-1") out << " resv=job" << resv << "/gen" << value_of(m, s.resv_gen[dev]);
    out << "}";
  }
  out << "\n";
  for (int j = 0; j < s.num_jobs(); ++j) out << "      " << show_job(m, s, j) << "\n";
  return out.str();
}

std::string show_event(z3::model& m, const SymRow& row, int j, const SymParams& p) {
  return std::string(spec::event_name(row.event)) + " job" + std::to_string(j) +
         show_params(m, p, row.event) + "  via row " + row.label();
}

std::string show_params(z3::model& m, const SymParams& p, spec::EventKind e) {
  using spec::EventKind;
  std::ostringstream out;
  auto sel = [&] {
    std::ostringstream o;
    o << " devices={";
    bool first = true;
    for (std::size_t dev = 0; dev < p.sel.size(); ++dev)
      if (truth_of(m, p.sel[dev])) {
        o << (first ? "" : ",") << "d" << dev;
        first = false;
      }
    o << "} splice=" << value_of(m, p.splice);
    return o.str();
  };
  switch (e) {
    case EventKind::kSubmit:
      out << " tier=" << value_of(m, p.tier) << " dtype=" << value_of(m, p.dtype)
          << " world=" << value_of(m, p.world) << " min=" << value_of(m, p.min_dev)
          << " max=" << value_of(m, p.max_dev) << " mem=" << value_of(m, p.mem)
          << " mode=" << value_of(m, p.mode);
      break;
    case EventKind::kPlace:
    case EventKind::kResume:
    case EventKind::kResizeUp:
      out << sel();
      break;
    case EventKind::kResizeDown:
      out << sel() << " beneficiary=job" << value_of(m, p.beneficiary) << " op="
          << value_of(m, p.op);
      break;
    case EventKind::kMigrate:
      out << sel() << " step=" << value_of(m, p.step);
      break;
    case EventKind::kPreempt:
      out << " beneficiary=job" << value_of(m, p.beneficiary) << " op=" << value_of(m, p.op);
      break;
    case EventKind::kRelease:
      break;
    case EventKind::kRetype:
      out << " dtype=" << value_of(m, p.dtype);
      break;
    case EventKind::kProgress:
      out << " step=" << value_of(m, p.step) << " gpu_ms=" << value_of(m, p.gpu_ms);
      break;
    case EventKind::kCheckpoint:
    case EventKind::kCheckpointDone:
      out << " step=" << value_of(m, p.step);
      break;
    default:
      break;
  }
  return out.str();
}

}  // namespace orrery::checker
