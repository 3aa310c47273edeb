// A job spec the CLI accepts is one the system can run: random TOML job specs, valid and
// borderline (every limit of spec/limits.h at, just under and just over its value), go through
// the CLI's parser (runtime/cli/job_spec.cc, which runs the one job-spec validation,
// core/service/job_spec_check.h). For every spec it accepts:
//   - the runtime's own limits hold: the node agent launches its world (spec::kMaxRunWorld) and
//     the workload takes the "--steps=N" the service appends (runtime/workloads/mlp_job.h);
//   - on a fleet big enough for it (nodes of its device type and memory, each node with host
//     memory for its swapped-out workers, premium reserve for its minimum), which the core's fleet
//     parser must accept, the core takes Submit and Admit, the gang placer (core/policy/
//     gang_placer.h) finds a placement and the core commits it: the job reaches Placed; and
//     admission (core/fleet_fit.h, which refuses at submit what no placement could satisfy)
//     accepts it on that fleet.
// A parser or validation laxer than the spec's submit guard, the core's fleet limits or the
// runtime's limits fails it (checked by hand: with the world bound raised to kMaxWorld, or the
// split check dropped, it fails within a few cases).
//
// ORRERY_JOBSPEC_CASES (default 1000) sets the number of specs.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/decision.h"
#include "core/fleet.h"
#include "core/fleet_fit.h"
#include "core/node_bootstrap.h"
#include "core/policy/gang_placer.h"
#include "core/scheduler_core.h"
#include "runtime/cli/job_spec.h"
#include "runtime/workloads/mlp_job.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::proptest {
namespace {

using spec::EventKind;
using spec::JobState;

struct Stats {
  int accepted = 0;
  int refused = 0;
  std::int64_t largest_world = 0;
  std::int64_t largest_fleet = 0;
};
Stats g_stats;

// ---- Generators: TOML text of a job spec, valid and borderline ---------------------------------

// A TOML basic string holding `s` (escapes for quote, backslash and control characters).
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789ABCDEF";
      o += "\\u00";
      o += hex[c >> 4];
      o += hex[c & 15];
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

rc::Gen<std::string> gen_plain_name(std::size_t lo, std::size_t hi) {
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(lo, hi + 1), [](std::size_t n) {
    return rc::gen::map(
        rc::gen::container<std::string>(
            n, rc::gen::element('a', 'Z', '0', '9', '.', '_', '-', 'q', 'x', '7')),
        [](std::string s) {
          if (!s.empty() && (s[0] == '.' || s[0] == '_' || s[0] == '-')) s[0] = 'a';
          return s;
        });
  });
}

// A name: mostly valid, sometimes at or past a limit or with a forbidden character.
rc::Gen<std::string> gen_name() {
  const auto max = spec::kMaxNameLength;
  return rc::gen::weightedOneOf<std::string>({
      {40, gen_plain_name(1, 12)},
      {2, gen_plain_name(max, max)},
      {1, gen_plain_name(max + 1, max + 1)},
      {1, rc::gen::element<std::string>("", "a b", "-a", ".a", "a/b", "a\nb", "a\"b", "x=1")},
  });
}

rc::Gen<std::int64_t> gen_count(std::int64_t limit) {
  return rc::gen::weightedOneOf<std::int64_t>({
      {20, rc::gen::inRange<std::int64_t>(1, 65)},
      {4, rc::gen::inRange<std::int64_t>(1, limit + 2)},
      {3, rc::gen::element<std::int64_t>(limit - 1, limit, limit + 1)},
      {1, rc::gen::element<std::int64_t>(std::int64_t{0}, std::int64_t{-1}, spec::kMaxWorld, spec::kMaxWorld + 1)},
  });
}

rc::Gen<std::int64_t> gen_big(std::int64_t limit, std::int64_t low) {
  return rc::gen::weightedOneOf<std::int64_t>({
      {20, rc::gen::inRange<std::int64_t>(1, 100'000)},
      {3, rc::gen::element<std::int64_t>(limit - 1, limit, limit + 1, std::int64_t{1} << 30,
                                         (std::int64_t{1} << 30) + 1)},
      {1, rc::gen::element(std::int64_t{low}, low - 1, std::int64_t{-1})},
  });
}

rc::Gen<std::string> gen_arg() {
  return rc::gen::weightedOneOf<std::string>({
      {40, rc::gen::element<std::string>("--x", "--batch=4", "a b", "", "--lr=0.5")},
      {1, rc::gen::element<std::string>(std::string(spec::kMaxArgLength, 'a'),
                                        std::string(spec::kMaxArgLength + 1, 'a'), "a\nb",
                                        std::string("a\0b", 3), "a\rb")},
  });
}

rc::Gen<std::vector<std::string>> gen_args() {
  return rc::gen::mapcat(
      rc::gen::weightedOneOf<std::size_t>({
          {20, rc::gen::inRange<std::size_t>(0, 4)},
          {1, rc::gen::element<std::size_t>(spec::kMaxArgs - 1, spec::kMaxArgs, spec::kMaxArgs + 1)},
      }),
      [](std::size_t n) {
        if (n > 8) {  // long lists: short arguments, one of them maybe borderline
          return rc::gen::map(gen_arg(), [n](std::string a) {
            std::vector<std::string> v(n, "--x");
            v[n / 2] = a;
            return v;
          });
        }
        return rc::gen::container<std::vector<std::string>>(n, gen_arg());
      });
}

// One TOML job spec: every key optional but name and world (which may be left out too, rarely).
rc::Gen<std::string> gen_toml() {
  return rc::gen::exec([]() {
    std::ostringstream o;
    auto maybe = [](int percent) { return *rc::gen::inRange(0, 100) < percent; };
    if (maybe(98)) o << "name = " << quoted(*gen_name()) << "\n";
    std::int64_t world = *gen_count(spec::kMaxRunWorld);
    if (maybe(98)) o << "world = " << world << "\n";
    if (maybe(60)) {
      const std::int64_t max = *rc::gen::weightedOneOf<std::int64_t>({
          {12, rc::gen::map(rc::gen::inRange<std::int64_t>(1, spec::kSpliceLimit + 2),
                           [world](std::int64_t k) { return std::max<std::int64_t>(world / k, 1); })},
          {1, gen_count(spec::kMaxRunWorld)},
          {1, rc::gen::just(world + 1)},
      });
      o << "max_devices = " << max << "\n";
      if (maybe(60)) {
        const std::int64_t min = *rc::gen::weightedOneOf<std::int64_t>({
            {12, rc::gen::map(rc::gen::inRange<std::int64_t>(1, spec::kSpliceLimit + 2),
                             [max](std::int64_t k) { return std::max<std::int64_t>(max / k, 1); })},
            {1, rc::gen::element(std::int64_t{0}, std::int64_t{1}, std::int64_t{max}, max + 1)},
        });
        o << "min_devices = " << min << "\n";
      }
    }
    if (maybe(50))
      o << "tier = " << quoted(*rc::gen::element<std::string>("premium", "standard", "basic", "premium", "standard",
                                                  "basic", "gold"))
        << "\n";
    if (maybe(60)) {
      o << "device_type = "
        << quoted(*rc::gen::weightedOneOf<std::string>(
               {{4, rc::gen::element<std::string>("host", "H100-80G", "A100-40G")}, {1, gen_name()}}))
        << "\n";
    }
    if (maybe(60)) o << "mem_mib = " << *gen_big(spec::kMaxMemMib, 1) << "\n";
    if (maybe(60)) o << "steps = " << *gen_big(spec::kMaxSteps, 1) << "\n";
    if (maybe(30)) o << "checkpoint_every = " << *gen_big(spec::kMaxSteps, 0) << "\n";
    if (maybe(30)) {
      o << "workload = "
        << quoted(*rc::gen::weightedOneOf<std::string>(
               {{4, rc::gen::just<std::string>("mlp")}, {1, gen_name()}}))
        << "\n";
    }
    if (maybe(30)) o << "tenant = " << quoted(*gen_name()) << "\n";
    if (maybe(30)) {
      o << "args = [";
      const auto args = *gen_args();
      for (std::size_t i = 0; i < args.size(); ++i) o << (i ? ", " : "") << quoted(args[i]);
      o << "]\n";
    }
    return o.str();
  });
}

// ---- A fleet big enough for a job ----------------------------------------------------------------

// The most devices a node of the fleet gets: what one node agent runs.
constexpr std::int64_t kDevicesPerNode = spec::kMaxAgentDevices;

struct Sized {
  std::string text;  // core/fleet.h format
  std::int64_t devices = 0;
};

// Enough devices for the job's largest device count that splits its world (the least splicing,
// the least host memory), `per_node` devices a node, each node with host memory for the
// swapped-out workers of its devices.
Sized fleet_for(const service::JobSpec& s) {
  std::int64_t count = 0;
  for (int f = 1; f <= spec::kSpliceLimit; ++f) {
    if (s.world % f == 0 && s.min_devices <= s.world / f && s.world / f <= s.max_devices) {
      count = s.world / f;
      break;
    }
  }
  RC_ASSERT(count > 0);
  const std::int64_t splice = s.world / count;
  const std::int64_t swap_per_device = (splice - 1) * s.mem_mib;
  std::int64_t per_node = kDevicesPerNode;
  if (swap_per_device > 0) per_node = std::clamp<std::int64_t>(spec::kMaxHostMemMib / swap_per_device, 1, per_node);
  std::ostringstream o;
  o << "premium_reserve " << (s.tier == spec::Tier::kPremium ? count : 0) << "\n";
  o << "region r1\ncluster c1\n";
  for (std::int64_t placed = 0, n = 0; placed < count; ++n) {
    const std::int64_t here = std::min(per_node, count - placed);
    o << "node n" << n << " host_mem_mib=" << here * swap_per_device << "\n";
    o << "devices " << s.device_type << " count=" << here << " mem_mib=" << s.mem_mib << "\n";
    placed += here;
  }
  return {o.str(), count};
}

// ---- The property ------------------------------------------------------------------------------

RC_GTEST_PROP(JobSpecPlaceable, AcceptedSpecsRunAndArePlacedOnABigEnoughFleet, ()) {
  const std::string text = *gen_toml();
  RC_TAG(text.size() > 4096 ? "long" : "short");
  auto parsed = cli::parse_job_spec(text, "job.toml");
  if (!parsed.ok()) {
    ++g_stats.refused;
    RC_TAG("refused");
    // Errors name the source and a field (or say what is wrong with the TOML).
    RC_ASSERT(parsed.reason().rfind("job.toml", 0) == 0);
    return;
  }
  ++g_stats.accepted;
  RC_TAG("accepted");
  const service::JobSpec& s = *parsed;
  RC_LOG() << "spec:\n" << cli::to_toml(s);
  g_stats.largest_world = std::max(g_stats.largest_world, s.world);

  // The runtime can run it: the node agent's launch bound, the workload's steps.
  RC_ASSERT(s.world <= spec::kMaxRunWorld);
  RC_ASSERT(s.command.size() <= spec::kMaxCommand);
  if (s.command[0] == "orrery-train-mlp") {
    auto mlp = runtime::parse_mlp_args({"--steps=" + std::to_string(s.steps)});
    if (!mlp.ok()) RC_FAIL("orrery-train-mlp refuses --steps=" + std::to_string(s.steps) + ": " + mlp.reason());
  }

  // A fleet big enough, which the core's fleet parser accepts.
  const Sized sized = fleet_for(s);
  g_stats.largest_fleet = std::max(g_stats.largest_fleet, sized.devices);
  auto fleet = core::Fleet::parse(sized.text);
  if (!fleet.ok()) RC_FAIL("the core refuses a fleet big enough for the job: " + fleet.reason());
  core::ManualClock clock;
  auto made = core::SchedulerCore::create(std::move(*fleet), clock, nullptr);
  if (!made.ok()) RC_FAIL("core: " + made.reason());
  core::SchedulerCore& c = **made;
  if (auto up = core::bring_up_all_nodes(c); !up.ok()) RC_FAIL("nodes: " + up.reason());
  // Admission (core/fleet_fit.h) takes what a fleet big enough can place: never stricter.
  core::FitRequest fit;
  fit.dtype = c.fleet().type_id(s.device_type);
  fit.world = s.world;
  fit.min_devices = s.min_devices;
  fit.max_devices = s.max_devices;
  fit.mem_mib = s.mem_mib;
  fit.mode = s.preemption;
  if (auto st = core::fits_fleet(c.fleet(), fit); !st.ok())
    RC_FAIL("admission refuses a job a fleet big enough for it can place: " + st.reason());

  auto submitted = c.commit(core::Decision::submit(s.name, s.tier, s.device_type, s.world,
                                                   s.min_devices, s.max_devices, s.mem_mib, s.tenant));
  if (!submitted.ok()) RC_FAIL("the core refuses the Submit: " + submitted.reason());
  const int job = submitted->job;
  core::Decision admit;
  admit.event = EventKind::kAdmit;
  admit.origin = spec::Origin::kPlanner;
  admit.job = job;
  if (auto a = c.commit(admit); !a.ok()) RC_FAIL("the core refuses the Admit: " + a.reason());
  RC_ASSERT(c.state(job) == JobState::kQueued);

  core::policy::GangPlacer placer(c);
  auto proposal = placer.propose(job, EventKind::kPlace);
  if (proposal.kind != core::policy::Proposal::Kind::kOk)
    RC_FAIL("the gang placer finds no placement: " + proposal.why);
  if (auto p = c.commit(proposal.decision); !p.ok()) RC_FAIL("the core refuses the Place: " + p.reason());
  RC_ASSERT(c.state(job) == JobState::kPlaced);
}

// The generator reaches both sides of the validation, and specs at the limits.
TEST(JobSpecPlaceable, BoundarySpecsAreAcceptedAndPlaced) {
  const std::string at_limits =
      "name = \"" + std::string(spec::kMaxNameLength, 'n') + "\"\nworld = " +
      std::to_string(spec::kMaxRunWorld) + "\nmin_devices = " + std::to_string(spec::kMaxRunWorld / 8) +
      "\nmem_mib = " + std::to_string(spec::kMaxMemMib) + "\nsteps = " + std::to_string(spec::kMaxSteps) +
      "\ntier = \"premium\"\n";
  auto s = cli::parse_job_spec(at_limits, "job.toml");
  ASSERT_TRUE(s.ok()) << s.reason();
  auto mlp = runtime::parse_mlp_args({"--steps=" + std::to_string(s->steps)});
  EXPECT_TRUE(mlp.ok()) << mlp.reason();
  const Sized sized = fleet_for(*s);
  EXPECT_EQ(sized.devices, spec::kMaxRunWorld);
  auto fleet = core::Fleet::parse(sized.text);
  ASSERT_TRUE(fleet.ok()) << fleet.reason();
  // Just past the limits: refused, naming the field.
  EXPECT_NE(cli::parse_job_spec("name = \"a\"\nworld = " + std::to_string(spec::kMaxRunWorld + 1) + "\n",
                                "job.toml")
                .reason()
                .find("world:"),
            std::string::npos);
  EXPECT_NE(cli::parse_job_spec("name = \"a\"\nworld = 1\nsteps = " + std::to_string(spec::kMaxSteps + 1) + "\n",
                                "job.toml")
                .reason()
                .find("steps:"),
            std::string::npos);
}

}  // namespace
}  // namespace orrery::proptest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  long cases = 1000;
  if (const char* env = std::getenv("ORRERY_JOBSPEC_CASES")) {
    char* end = nullptr;
    cases = std::strtol(env, &end, 10);
    if (*env == '\0' || *end != '\0' || cases < 1) {
      std::cerr << "ORRERY_JOBSPEC_CASES must be a positive integer, got \"" << env << "\"\n";
      return 2;
    }
  }
  // RapidCheck reads RC_PARAMS once, on first use: complete it before any property runs.
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos) params += " max_success=" + std::to_string(cases);
  setenv("RC_PARAMS", params.c_str(), 1);
  const int rc = RUN_ALL_TESTS();
  std::cout << "jobspec_placeable: " << orrery::proptest::g_stats.accepted << " specs accepted (all placed), "
            << orrery::proptest::g_stats.refused << " refused; largest world " << orrery::proptest::g_stats.largest_world
            << ", largest fleet " << orrery::proptest::g_stats.largest_fleet << " devices\n";
  return rc;
}
