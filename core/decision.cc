#include "core/decision.h"

#include <cstring>

namespace orrery::core {

namespace {

// The tag of a Submit's program part (a workload name cannot contain a space).
constexpr const char* kRunTag = "run v2";

void put_i64(std::string& out, std::int64_t v) {
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void put_str(std::string& out, std::string_view s) {
  put_i64(out, static_cast<std::int64_t>(s.size()));
  out.append(s);
}

// Reads fields off a byte string; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  std::int64_t i64(const char* field) {
    if (!err_.empty()) return 0;
    if (b_.size() - pos_ < 8) {
      err_ = std::string("record ends inside field '") + field + "'";
      return 0;
    }
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i)
      u |= static_cast<std::uint64_t>(static_cast<unsigned char>(b_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return static_cast<std::int64_t>(u);
  }
  std::string str(const char* field) {
    auto n = i64(field);
    if (!err_.empty()) return {};
    if (n < 0 || static_cast<std::uint64_t>(n) > b_.size() - pos_) {
      err_ = std::string("bad length for field '") + field + "'";
      return {};
    }
    std::string s(b_.substr(pos_, static_cast<std::size_t>(n)));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  bool done() const { return pos_ == b_.size(); }
  const std::string& error() const { return err_; }
  void fail(std::string e) {
    if (err_.empty()) err_ = std::move(e);
  }

 private:
  std::string_view b_;
  std::size_t pos_ = 1;  // after the kind byte
  std::string err_;
};

}  // namespace

Decision Decision::submit(std::string name, spec::Tier tier, std::string device_type, std::int64_t world,
                          std::int64_t min_devices, std::int64_t max_devices, std::int64_t mem_mib,
                          std::string tenant) {
  Decision d;
  d.event = spec::EventKind::kSubmit;
  d.origin = spec::Origin::kOperator;
  d.name = std::move(name);
  d.tier = tier;
  d.device_type = std::move(device_type);
  d.world = world;
  d.min_devices = min_devices;
  d.max_devices = max_devices;
  d.mem_mib = mem_mib;
  d.tenant = std::move(tenant);
  return d;
}

Decision Decision::retype(std::int64_t job, std::string type) {
  Decision d;
  d.event = spec::EventKind::kRetype;
  d.origin = spec::Origin::kPlanner;
  d.job = job;
  d.device_type = std::move(type);
  return d;
}

std::string Decision::describe() const {
  std::string s = std::string(spec::event_name(event));
  if (event == spec::EventKind::kSubmit) {
    s += " '" + name + "' " + std::string(spec::tier_name(tier)) + " W=" + std::to_string(world) +
         " devices=[" + std::to_string(min_devices) + "," + std::to_string(max_devices) + "] " +
         device_type;
    if (!tenant.empty()) s += " tenant " + tenant;
    return s;
  }
  s += " job " + std::to_string(job);
  if (!devices.empty()) {
    s += " on {";
    for (std::size_t i = 0; i < devices.size(); ++i)
      s += (i ? "," : "") + std::to_string(devices[i]);
    s += "} x" + std::to_string(splice);
  }
  if (beneficiary >= 0) s += " for job " + std::to_string(beneficiary);
  switch (event) {
    case spec::EventKind::kRetype:
      s += " to " + device_type;
      break;
    case spec::EventKind::kProgress:
      s += " step " + std::to_string(step) + " +" + std::to_string(gpu_ms) + " gpu-ms";
      break;
    case spec::EventKind::kCheckpoint:
    case spec::EventKind::kCheckpointDone:
      s += " ckpt@" + std::to_string(step);
      break;
    default:
      break;
  }
  return s;
}

std::string NodeDecision::describe() const {
  return std::string(spec::node_event_name(event)) + " node " + std::to_string(node);
}

std::string encode_node_record(const NodeDecision& d, std::int64_t time_ms) {
  std::string out(1, static_cast<char>(RecordKind::kNode));
  put_i64(out, time_ms);
  put_i64(out, static_cast<std::int64_t>(d.event));
  put_i64(out, static_cast<std::int64_t>(d.origin));
  put_i64(out, d.node);
  return out;
}

std::string encode_fleet_record(std::string_view fleet_text) {
  std::string out(1, static_cast<char>(RecordKind::kFleet));
  out.append(fleet_text);
  return out;
}

std::string encode_decision_record(const Decision& d, std::int64_t time_ms) {
  std::string out(1, static_cast<char>(RecordKind::kDecision));
  put_i64(out, time_ms);
  put_i64(out, static_cast<std::int64_t>(d.event));
  put_i64(out, static_cast<std::int64_t>(d.origin));
  put_i64(out, d.job);
  put_str(out, d.name);
  put_i64(out, static_cast<std::int64_t>(d.tier));
  put_str(out, d.device_type);
  put_i64(out, d.world);
  put_i64(out, d.min_devices);
  put_i64(out, d.max_devices);
  put_i64(out, d.mem_mib);
  put_i64(out, d.step);
  put_i64(out, d.gpu_ms);
  put_i64(out, d.splice);
  put_i64(out, d.beneficiary);
  put_i64(out, static_cast<std::int64_t>(d.devices.size()));
  for (auto dev : d.devices) put_i64(out, dev);
  // Last and only when set: records of journals written before tenants existed end here, and a
  // Submit without a tenant or a program is encoded exactly as it was then. The program part
  // starts with the tag kRunTag (journals before users' programs had a workload name there).
  const bool run = !d.command.empty() || d.mode != spec::Preemption::kTransparent ||
                   d.min_runtime_ms != 0 || d.steps != 0 || d.checkpoint_every != 0;
  if (!d.tenant.empty() || run) put_str(out, d.tenant);
  if (run) {
    put_str(out, kRunTag);
    put_i64(out, static_cast<std::int64_t>(d.mode));
    put_i64(out, d.steps);
    put_i64(out, d.checkpoint_every);
    put_i64(out, d.grace_ms);
    put_i64(out, d.min_runtime_ms);
    put_str(out, d.workdir);
    put_i64(out, static_cast<std::int64_t>(d.command.size()));
    for (const auto& a : d.command) put_str(out, a);
    put_i64(out, static_cast<std::int64_t>(d.env.size()));
    for (const auto& e : d.env) put_str(out, e);
  }
  return out;
}

Result<DecodedRecord> decode_record(std::string_view bytes) {
  if (bytes.empty()) return Status::Error("empty record");
  DecodedRecord r;
  if (bytes[0] == static_cast<char>(RecordKind::kFleet)) {
    r.kind = RecordKind::kFleet;
    r.fleet_text = std::string(bytes.substr(1));
    return r;
  }
  if (bytes[0] == static_cast<char>(RecordKind::kNode)) {
    r.kind = RecordKind::kNode;
    Reader in(bytes);
    r.time_ms = in.i64("time_ms");
    auto event = in.i64("event");
    auto origin = in.i64("origin");
    r.node.node = in.i64("node");
    if (in.error().empty() && !in.done()) in.fail("trailing bytes after node decision");
    if (in.error().empty() && (event < 0 || event >= spec::kNumNodeEvents))
      in.fail("unknown node event " + std::to_string(event));
    if (in.error().empty() && (origin < 0 || origin >= spec::kNumOrigins))
      in.fail("unknown origin " + std::to_string(origin));
    if (!in.error().empty()) return Status::Error("bad node decision record: " + in.error());
    r.node.event = static_cast<spec::NodeEvent>(event);
    r.node.origin = static_cast<spec::Origin>(origin);
    return r;
  }
  if (bytes[0] != static_cast<char>(RecordKind::kDecision))
    return Status::Error("unknown record kind byte " +
                         std::to_string(static_cast<unsigned char>(bytes[0])));
  Reader in(bytes);
  Decision& d = r.decision;
  r.time_ms = in.i64("time_ms");
  auto event = in.i64("event");
  auto origin = in.i64("origin");
  d.job = in.i64("job");
  d.name = in.str("name");
  auto tier = in.i64("tier");
  d.device_type = in.str("device_type");
  d.world = in.i64("world");
  d.min_devices = in.i64("min_devices");
  d.max_devices = in.i64("max_devices");
  d.mem_mib = in.i64("mem_mib");
  d.step = in.i64("step");
  d.gpu_ms = in.i64("gpu_ms");
  d.splice = in.i64("splice");
  d.beneficiary = in.i64("beneficiary");
  auto n = in.i64("device count");
  if (in.error().empty() && (n < 0 || n > (1 << 20))) in.fail("device count out of range");
  for (std::int64_t i = 0; in.error().empty() && i < n; ++i) d.devices.push_back(in.i64("device"));
  if (in.error().empty() && !in.done()) d.tenant = in.str("tenant");
  std::int64_t mode = 0;
  if (in.error().empty() && !in.done()) {
    auto strs = [&](const char* count_what, const char* what, std::vector<std::string>& to) {
      auto n = in.i64(count_what);
      if (in.error().empty() && (n < 0 || n > (1 << 16))) in.fail(std::string(count_what) + " out of range");
      for (std::int64_t i = 0; in.error().empty() && i < n; ++i) to.push_back(in.str(what));
    };
    const std::string tag = in.str("program tag");
    if (tag == kRunTag) {
      mode = in.i64("preemption");
      d.steps = in.i64("steps");
      d.checkpoint_every = in.i64("checkpoint_every");
      d.grace_ms = in.i64("grace_ms");
      d.min_runtime_ms = in.i64("min_runtime_ms");
      d.workdir = in.str("workdir");
      strs("argument count", "argument", d.command);
      strs("environment count", "environment entry", d.env);
    } else {
      // A journal from before users' programs: a built-in workload's name, then its arguments.
      d.steps = in.i64("steps");
      d.checkpoint_every = in.i64("checkpoint_every");
      std::vector<std::string> args;
      strs("argument count", "argument", args);
      d.command = {"orrery-train-" + tag};
      d.command.insert(d.command.end(), args.begin(), args.end());
      d.command.push_back("--steps=" + std::to_string(d.steps));
    }
  }
  if (in.error().empty() && (mode < 0 || mode >= spec::kNumPreemptions))
    in.fail("unknown preemption mode " + std::to_string(mode));
  d.mode = static_cast<spec::Preemption>(mode);
  if (in.error().empty() && !in.done()) in.fail("trailing bytes after decision");
  if (in.error().empty() && (event < 0 || event >= spec::kNumEventKinds))
    in.fail("unknown event " + std::to_string(event));
  if (in.error().empty() && (tier < 0 || tier >= spec::kNumTiers))
    in.fail("unknown tier " + std::to_string(tier));
  if (in.error().empty() && (origin < 0 || origin >= spec::kNumOrigins))
    in.fail("unknown origin " + std::to_string(origin));
  if (!in.error().empty()) return Status::Error("bad decision record: " + in.error());
  d.event = static_cast<spec::EventKind>(event);
  d.tier = static_cast<spec::Tier>(tier);
  d.origin = static_cast<spec::Origin>(origin);
  return r;
}

}  // namespace orrery::core
