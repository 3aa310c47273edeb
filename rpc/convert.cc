#include "rpc/convert.h"

#include "base/quote.h"
#include "core/service/job_spec_check.h"
#include "spec/limits.h"

namespace orrery::rpc {

namespace {

template <class E>
Result<int> enum_in(E e, int count, const char* what) {
  int v = static_cast<int>(e);
  if (v < 0 || v >= count)
    return Status::InvalidArgument(std::string(what) + ": unknown value " + std::to_string(v));
  return v;
}

}  // namespace

Result<std::string> text_from_wire(capnp::Text::Reader t, const char* what) {
  if (t.size() > kMaxText)
    return Status::InvalidArgument(std::string(what) + " is too long (" + std::to_string(t.size()) + " bytes)");
  return std::string(t.cStr(), t.size());
}

Result<std::vector<std::string>> texts_from_wire(capnp::List<capnp::Text>::Reader r, std::size_t max,
                                                const char* what) {
  if (r.size() > max)
    return Status::InvalidArgument(std::string(what) + ": at most " + std::to_string(max) + " entries, got " +
                                   std::to_string(r.size()));
  std::vector<std::string> out;
  for (auto a : r) {
    auto t = text_from_wire(a, what);
    if (!t) return t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

void texts_to_wire(const std::vector<std::string>& v, capnp::List<capnp::Text>::Builder b) {
  for (unsigned i = 0; i < v.size(); ++i) b.set(i, v[i]);
}

Result<service::JobSpec> job_spec_from_wire(wire::JobSpec::Reader r) {
  service::JobSpec s;
  auto name = text_from_wire(r.getName(), "name");
  if (!name) return name.status();
  s.name = *name;
  auto tier = enum_in(r.getTier(), spec::kNumTiers, "tier");
  if (!tier) return tier.status();
  s.tier = static_cast<spec::Tier>(*tier);
  auto dt = text_from_wire(r.getDeviceType(), "device_type");
  if (!dt) return dt.status();
  s.device_type = dt->empty() ? "host" : *dt;
  s.world = r.getWorld();
  s.min_devices = r.getMinDevices();
  s.max_devices = r.getMaxDevices();
  s.mem_mib = r.getMemMib();
  auto wd = text_from_wire(r.getWorkdir(), "workdir");
  if (!wd) return wd.status();
  s.workdir = *wd;
  // Bounds before copying; the limits themselves are validate_job_spec's (below), with the same words.
  auto cmd = texts_from_wire(r.getCommand(), spec::kMaxCommand, "command");
  if (!cmd) return cmd.status();
  s.command = std::move(*cmd);
  auto env = texts_from_wire(r.getEnv(), spec::kMaxEnv, "env");
  if (!env) return env.status();
  for (const auto& e : *env) {
    auto eq = e.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("env: " + quote_input(e) + " is not NAME=VALUE");
    s.env.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  auto mode = enum_in(r.getPreemption(), spec::kNumPreemptions, "preemption");
  if (!mode) return mode.status();
  s.preemption = static_cast<spec::Preemption>(*mode);
  s.grace_ms = r.getGraceMs();
  s.min_runtime_ms = r.getMinRuntimeMs();
  s.steps = r.getSteps();
  s.checkpoint_every = r.getCheckpointEvery();
  auto tenant = text_from_wire(r.getTenant(), "tenant");
  if (!tenant) return tenant.status();
  s.tenant = *tenant;
  // A spec from a peer that fails validation is bad input, whatever code the check gives.
  if (auto st = service::validate_job_spec(s); !st) return Status::InvalidArgument(st.reason());
  return s;
}

void job_spec_to_wire(const service::JobSpec& s, wire::JobSpec::Builder b) {
  b.setName(s.name);
  b.setTier(static_cast<wire::Tier>(s.tier));
  b.setDeviceType(s.device_type);
  b.setWorld(s.world);
  b.setMinDevices(s.min_devices);
  b.setMaxDevices(s.max_devices);
  b.setMemMib(s.mem_mib);
  b.setWorkdir(s.workdir);
  texts_to_wire(s.command, b.initCommand(static_cast<unsigned>(s.command.size())));
  auto env = b.initEnv(static_cast<unsigned>(s.env.size()));
  for (unsigned i = 0; i < s.env.size(); ++i) env.set(i, s.env[i].first + "=" + s.env[i].second);
  b.setPreemption(static_cast<wire::Preemption>(s.preemption));
  b.setGraceMs(s.grace_ms);
  b.setMinRuntimeMs(s.min_runtime_ms);
  b.setSteps(s.steps);
  b.setCheckpointEvery(s.checkpoint_every);
  b.setTenant(s.tenant);
}

Result<service::JobStatus> job_status_from_wire(wire::JobStatus::Reader r) {
  service::JobStatus s;
  s.job = r.getJob();
  auto name = text_from_wire(r.getName(), "name");
  if (!name) return name.status();
  s.name = *name;
  auto tier = enum_in(r.getTier(), spec::kNumTiers, "tier");
  if (!tier) return tier.status();
  s.tier = static_cast<spec::Tier>(*tier);
  auto st = enum_in(r.getState(), spec::kNumJobStates, "state");
  if (!st) return st.status();
  s.state = static_cast<spec::JobState>(*st);
  s.epoch = r.getEpoch();
  s.world = r.getWorld();
  s.devices = r.getDevices();
  s.splice = r.getSplice();
  s.progress = r.getProgress();
  s.steps = r.getSteps();
  s.checkpoint = r.getCheckpoint();
  if (r.getNodes().size() > kMaxList) return Status::InvalidArgument("too many nodes");
  for (auto n : r.getNodes()) {
    auto t = text_from_wire(n, "node");
    if (!t) return t.status();
    s.nodes.push_back(*t);
  }
  s.age_ms = r.getAgeMs();
  auto note = text_from_wire(r.getNote(), "note");
  if (!note) return note.status();
  s.note = *note;
  auto tenant = text_from_wire(r.getTenant(), "tenant");
  if (!tenant) return tenant.status();
  s.tenant = *tenant;
  auto type = text_from_wire(r.getDeviceType(), "device type");
  if (!type) return type.status();
  s.device_type = *type;
  return s;
}

void job_status_to_wire(const service::JobStatus& s, wire::JobStatus::Builder b) {
  b.setJob(s.job);
  b.setName(s.name);
  b.setTenant(s.tenant);
  b.setTier(static_cast<wire::Tier>(s.tier));
  b.setState(static_cast<wire::JobState>(s.state));
  b.setEpoch(s.epoch);
  b.setWorld(s.world);
  b.setDevices(s.devices);
  b.setSplice(s.splice);
  b.setProgress(s.progress);
  b.setSteps(s.steps);
  b.setCheckpoint(s.checkpoint);
  auto nodes = b.initNodes(static_cast<unsigned>(s.nodes.size()));
  for (unsigned i = 0; i < s.nodes.size(); ++i) nodes.set(i, s.nodes[i]);
  b.setAgeMs(s.age_ms);
  b.setNote(s.note);
  b.setDeviceType(s.device_type);
}

Result<service::NodeStatus> node_status_from_wire(wire::NodeStatus::Reader r) {
  service::NodeStatus s;
  auto name = text_from_wire(r.getName(), "name");
  if (!name) return name.status();
  s.name = *name;
  auto st = enum_in(r.getState(), spec::kNumNodeStates, "state");
  if (!st) return st.status();
  s.state = static_cast<spec::NodeState>(*st);
  s.devices = r.getDevices();
  s.held = r.getHeld();
  s.heartbeat_age_ms = r.getHeartbeatAgeMs();
  return s;
}

void node_status_to_wire(const service::NodeStatus& s, wire::NodeStatus::Builder b) {
  b.setName(s.name);
  b.setState(static_cast<wire::NodeState>(s.state));
  b.setDevices(s.devices);
  b.setHeld(s.held);
  b.setHeartbeatAgeMs(s.heartbeat_age_ms);
}

Result<service::ClusterEvent> event_from_wire(wire::ClusterEvent::Reader r) {
  service::ClusterEvent e;
  e.seq = r.getSeq();
  e.time_ms = r.getTimeMs();
  e.job = r.getJob();
  auto node = text_from_wire(r.getNode(), "node");
  if (!node) return node.status();
  e.node = *node;
  auto text = text_from_wire(r.getText(), "text");
  if (!text) return text.status();
  e.text = *text;
  return e;
}

void event_to_wire(const service::ClusterEvent& e, wire::ClusterEvent::Builder b) {
  b.setSeq(e.seq);
  b.setTimeMs(e.time_ms);
  b.setJob(e.job);
  b.setNode(e.node);
  b.setText(e.text);
}

Result<service::NodeReport> report_from_wire(wire::JobReport::Reader r) {
  service::NodeReport out;
  auto k = enum_in(r.getKind(), 6, "report kind");
  if (!k) return k.status();
  out.kind = static_cast<service::NodeReport::Kind>(*k);
  out.job = r.getJob();
  out.epoch = r.getEpoch();
  out.step = r.getStep();
  if (out.step < 0) return Status::InvalidArgument("report step must be >= 0, got " + std::to_string(out.step));
  out.gpu_ms = r.getGpuMs();
  if (out.gpu_ms < 0) return Status::InvalidArgument("report gpu_ms must be >= 0, got " + std::to_string(out.gpu_ms));
  auto d = text_from_wire(r.getDetail(), "detail");
  if (!d) return d.status();
  out.detail = *d;
  out.platform = r.getPlatform();
  return out;
}

void report_to_wire(const service::NodeReport& r, wire::JobReport::Builder b) {
  b.setKind(static_cast<wire::JobReport::Kind>(r.kind));
  b.setJob(r.job);
  b.setEpoch(r.epoch);
  b.setStep(r.step);
  b.setGpuMs(r.gpu_ms);
  b.setDetail(r.detail);
  b.setPlatform(r.platform);
}

Result<service::LaunchCommand> launch_from_wire(wire::Launch::Reader r) {
  service::LaunchCommand c;
  c.job = r.getJob();
  c.epoch = r.getEpoch();
  c.world = r.getWorld();
  if (c.job < 0) return Status::InvalidArgument("launch: job must be >= 0");
  if (c.world < 1 || c.world > spec::kMaxRunWorld) return Status::InvalidArgument("launch: world out of range");
  if (r.getLocal().size() > spec::kMaxNodeDevices) return Status::InvalidArgument("launch: too many local devices");
  for (auto l : r.getLocal()) {
    service::LocalShare s;
    s.device = l.getDevice();
    if (s.device < 0 || s.device >= spec::kMaxNodeDevices) return Status::InvalidArgument("launch: device index out of range");
    if (l.getRanks().size() > spec::kSpliceLimit) return Status::InvalidArgument("launch: more ranks on a device than the splice limit");
    for (auto rank : l.getRanks()) {
      if (rank < 0 || rank >= c.world) return Status::InvalidArgument("launch: rank out of range");
      s.ranks.push_back(rank);
    }
    c.local.push_back(std::move(s));
  }
  auto cmd = texts_from_wire(r.getCommand(), spec::kMaxCommand, "launch: command");
  if (!cmd) return cmd.status();
  c.command = std::move(*cmd);
  auto env = texts_from_wire(r.getEnv(), spec::kMaxEnv, "launch: env");
  if (!env) return env.status();
  c.env = std::move(*env);
  auto wd = text_from_wire(r.getWorkdir(), "workdir");
  if (!wd) return wd.status();
  c.workdir = *wd;
  auto mode = enum_in(r.getPreemption(), spec::kNumPreemptions, "launch: preemption");
  if (!mode) return mode.status();
  c.mode = static_cast<spec::Preemption>(*mode);
  c.grace_ms = r.getGraceMs();
  if (c.grace_ms < 0 || c.grace_ms > spec::kMaxGraceMs) return Status::InvalidArgument("launch: grace out of range");
  auto cd = text_from_wire(r.getCheckpointDir(), "checkpoint dir");
  if (!cd) return cd.status();
  c.checkpoint_dir = *cd;
  c.restart_count = r.getRestartCount();
  auto ma = text_from_wire(r.getMasterAddr(), "master address");
  if (!ma) return ma.status();
  c.master_addr = *ma;
  c.master_port = r.getMasterPort();
  if (c.master_port < 0 || c.master_port > 65535) return Status::InvalidArgument("launch: master port out of range");
  c.restore_step = r.getRestoreStep();
  auto col = text_from_wire(r.getCollective(), "collective");
  if (!col) return col.status();
  c.collective = *col;
  return c;
}

void launch_to_wire(const service::LaunchCommand& c, wire::Launch::Builder b) {
  b.setJob(c.job);
  b.setEpoch(c.epoch);
  b.setWorld(c.world);
  auto local = b.initLocal(static_cast<unsigned>(c.local.size()));
  for (unsigned i = 0; i < c.local.size(); ++i) {
    local[i].setDevice(c.local[i].device);
    auto ranks = local[i].initRanks(static_cast<unsigned>(c.local[i].ranks.size()));
    for (unsigned k = 0; k < c.local[i].ranks.size(); ++k) ranks.set(k, c.local[i].ranks[k]);
  }
  texts_to_wire(c.command, b.initCommand(static_cast<unsigned>(c.command.size())));
  texts_to_wire(c.env, b.initEnv(static_cast<unsigned>(c.env.size())));
  b.setWorkdir(c.workdir);
  b.setPreemption(static_cast<wire::Preemption>(c.mode));
  b.setGraceMs(c.grace_ms);
  b.setCheckpointDir(c.checkpoint_dir);
  b.setRestartCount(c.restart_count);
  b.setMasterAddr(c.master_addr);
  b.setMasterPort(c.master_port);
  b.setRestoreStep(c.restore_step);
  b.setCollective(c.collective);
}

Result<service::NodeInventory> inventory_from_wire(wire::Inventory::Reader r) {
  service::NodeInventory inv;
  auto t = text_from_wire(r.getDeviceType(), "device type");
  if (!t) return t.status();
  inv.device_type = *t;
  inv.devices = r.getDevices();
  inv.device_mem_mib = r.getDeviceMemMib();
  if (inv.devices < 0 || inv.devices > spec::kMaxNodeDevices)
    return Status::InvalidArgument("inventory: devices must be in [0, 4096], got " + std::to_string(inv.devices));
  return inv;
}

Result<std::vector<service::Incarnation>> running_from_wire(capnp::List<wire::Incarnation>::Reader r) {
  if (r.size() > kMaxList) return Status::InvalidArgument("too many running incarnations");
  std::vector<service::Incarnation> out;
  for (auto i : r) out.push_back({i.getJob(), i.getEpoch()});
  return out;
}

}  // namespace orrery::rpc
