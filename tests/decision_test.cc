// Unit tests of decisions and their journal encoding (core/decision.h): every event kind round
// trips; garbage, truncated records, bad enum values and trailing bytes are errors with a reason,
// never a crash.
#include "core/decision.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace orrery::core {
namespace {

using namespace std::string_literals;
using spec::EventKind;

// A decision with every field set to a distinct, non-default value (binary bytes in the strings).
Decision full_decision(EventKind e) {
  Decision d;
  d.event = e;
  d.job = 7 + static_cast<std::int64_t>(e);
  d.name = "job \xff\x00 n\xc3\xa9"s;
  d.tier = spec::Tier::kBasic;
  d.device_type = "H100-80G";
  d.world = 12;
  d.min_devices = 2;
  d.max_devices = 6;
  d.mem_mib = 40960;
  d.step = -3;  // the encoding must not care about plausibility
  d.gpu_ms = std::numeric_limits<std::int64_t>::max();
  d.splice = 4;
  d.beneficiary = std::numeric_limits<std::int64_t>::min();
  d.devices = {5, 0, 3, 1LL << 40};
  return d;
}

void ExpectSameDecision(const Decision& a, const Decision& b) {
  EXPECT_EQ(a.event, b.event);
  EXPECT_EQ(a.origin, b.origin);
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.tier, b.tier);
  EXPECT_EQ(a.device_type, b.device_type);
  EXPECT_EQ(a.world, b.world);
  EXPECT_EQ(a.min_devices, b.min_devices);
  EXPECT_EQ(a.max_devices, b.max_devices);
  EXPECT_EQ(a.mem_mib, b.mem_mib);
  EXPECT_EQ(a.tenant, b.tenant);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.gpu_ms, b.gpu_ms);
  EXPECT_EQ(a.splice, b.splice);
  EXPECT_EQ(a.beneficiary, b.beneficiary);
  EXPECT_EQ(a.devices, b.devices);
}

// Byte offsets of the fixed fields of a decision record whose name and device type are empty:
// kind(1) time event origin job name_len tier dtype_len world min max mem step gpu_ms splice
// beneficiary device_count devices...
enum Off : std::size_t {
  kTime = 1,
  kEvent = 9,
  kOrigin = 17,
  kJob = 25,
  kNameLen = 33,
  kTier = 41,
  kTypeLen = 49,
  kWorld = 57,
  kStep = 89,
  kDevCount = 121,
  kDevices = 129,
};

void set_i64(std::string& rec, std::size_t off, std::int64_t v) {
  ASSERT_LE(off + 8, rec.size());
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) rec[off + i] = static_cast<char>((u >> (8 * i)) & 0xff);
}

// An encoded decision with empty strings, so the offsets above hold.
std::string plain_record(std::vector<std::int64_t> devices = {1, 2}) {
  Decision d;
  d.event = EventKind::kPlace;
  d.job = 3;
  d.splice = 2;
  d.devices = std::move(devices);
  return encode_decision_record(d, 1234);
}

void ExpectDecodeError(std::string_view bytes, const std::string& needle) {
  auto r = decode_record(bytes);
  ASSERT_FALSE(r.ok()) << "decoded " << r->decision.describe();
  EXPECT_NE(r.reason().find(needle), std::string::npos)
      << "reason '" << r.reason() << "' lacks '" << needle << "'";
}

TEST(DecisionCodecTest, EveryEventKindRoundTrips) {
  for (int k = 0; k < spec::kNumEventKinds; ++k) {
    auto e = static_cast<EventKind>(k);
    SCOPED_TRACE(std::string(spec::event_name(e)));
    for (int t = 0; t < spec::kNumTiers; ++t) {
      auto d = full_decision(e);
      d.tier = static_cast<spec::Tier>(t);
      const std::int64_t time = 1700000000000 + k;
      auto bytes = encode_decision_record(d, time);
      EXPECT_EQ(bytes[0], 'D');
      auto r = decode_record(bytes);
      ASSERT_TRUE(r.ok()) << r.reason();
      EXPECT_EQ(r->kind, RecordKind::kDecision);
      EXPECT_EQ(r->time_ms, time);
      ExpectSameDecision(r->decision, d);
      EXPECT_EQ(encode_decision_record(r->decision, r->time_ms), bytes);
    }
  }
}

TEST(DecisionCodecTest, DefaultDecisionRoundTrips) {
  Decision d;
  auto r = decode_record(encode_decision_record(d, -1));
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->time_ms, -1);
  ExpectSameDecision(r->decision, d);
}

TEST(DecisionCodecTest, FleetRecordRoundTrips) {
  const std::string text = "premium_reserve 4\nregion r\n\x00\xff"s;
  auto bytes = encode_fleet_record(text);
  EXPECT_EQ(bytes[0], 'F');
  auto r = decode_record(bytes);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->kind, RecordKind::kFleet);
  EXPECT_EQ(r->fleet_text, text);
  auto empty = decode_record(encode_fleet_record(""));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->fleet_text, "");
}

TEST(DecisionCodecTest, LayoutMatchesTheOffsetsTheseTestsPatch) {
  auto rec = plain_record({1, 2});
  EXPECT_EQ(rec.size(), kDevices + 2 * 8);
  auto r = decode_record(rec);
  ASSERT_TRUE(r.ok()) << r.reason();
  set_i64(rec, kTime, 99);
  set_i64(rec, kJob, 42);
  set_i64(rec, kWorld, 8);
  set_i64(rec, kStep, 5);
  set_i64(rec, kDevices + 8, 6);
  r = decode_record(rec);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->time_ms, 99);
  EXPECT_EQ(r->decision.job, 42);
  EXPECT_EQ(r->decision.world, 8);
  EXPECT_EQ(r->decision.step, 5);
  EXPECT_EQ(r->decision.devices, (std::vector<std::int64_t>{1, 6}));
}

TEST(DecisionDecodeErrorTest, EmptyAndUnknownKind) {
  ExpectDecodeError("", "empty record");
  ExpectDecodeError("X", "unknown record kind byte 88");
  auto rec = plain_record();
  rec[0] = '\xfe';
  ExpectDecodeError(rec, "unknown record kind byte 254");
}

TEST(DecisionDecodeErrorTest, EveryTruncationIsAnErrorNamingTheField) {
  auto d = full_decision(EventKind::kMigrate);
  const auto rec = encode_decision_record(d, 5);
  for (std::size_t n = 1; n < rec.size(); ++n) {
    auto r = decode_record(std::string_view(rec).substr(0, n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " of " << rec.size() << " bytes decoded";
    EXPECT_NE(r.reason().find("bad decision record: "), std::string::npos) << r.reason();
    const bool names_field = r.reason().find("record ends inside field '") != std::string::npos ||
                             r.reason().find("bad length for field '") != std::string::npos;
    EXPECT_TRUE(names_field) << n << ": " << r.reason();
  }
  ExpectDecodeError(std::string_view(rec).substr(0, 1), "record ends inside field 'time_ms'");
  auto plain = plain_record({1, 2});
  ExpectDecodeError(std::string_view(plain).substr(0, kDevices + 12),
                    "record ends inside field 'device'");
  ExpectDecodeError(std::string_view(plain).substr(0, kDevCount + 3),
                    "record ends inside field 'device count'");
}

TEST(DecisionDecodeErrorTest, BadEventValues) {
  for (std::int64_t bad : {std::int64_t{spec::kNumEventKinds}, std::int64_t{-1}, std::int64_t{1000},
                           std::numeric_limits<std::int64_t>::min()}) {
    auto rec = plain_record();
    set_i64(rec, kEvent, bad);
    ExpectDecodeError(rec, "unknown event " + std::to_string(bad));
  }
}

TEST(DecisionDecodeErrorTest, BadTierValues) {
  for (std::int64_t bad : {std::int64_t{spec::kNumTiers}, std::int64_t{-1},
                           std::numeric_limits<std::int64_t>::max()}) {
    auto rec = plain_record();
    set_i64(rec, kTier, bad);
    ExpectDecodeError(rec, "unknown tier " + std::to_string(bad));
  }
}

TEST(DecisionDecodeErrorTest, BadOriginValues) {
  for (std::int64_t bad : {std::int64_t{spec::kNumOrigins}, std::int64_t{-1},
                           std::numeric_limits<std::int64_t>::max()}) {
    auto rec = plain_record();
    set_i64(rec, kOrigin, bad);
    ExpectDecodeError(rec, "unknown origin " + std::to_string(bad));
  }
}

// The whole job spec travels with its Submit: the journal alone rebuilds every job.
TEST(DecisionCodecTest, TheProgramOfASubmitRoundTrips) {
  auto d = Decision::submit("train", spec::Tier::kBasic, "H100", 4, 1, 4, 1024, "vision");
  d.command = {"/usr/bin/python3", "", "--seed=7"};
  d.env = {"A=1", "B="};
  d.workdir = "/home/u/run";
  d.mode = spec::Preemption::kSignal;
  d.grace_ms = 12500;
  d.min_runtime_ms = 60000;
  d.steps = 5000;
  d.checkpoint_every = 250;
  auto r = decode_record(encode_decision_record(d, 9));
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->decision.command, d.command);
  EXPECT_EQ(r->decision.env, d.env);
  EXPECT_EQ(r->decision.workdir, "/home/u/run");
  EXPECT_EQ(r->decision.mode, spec::Preemption::kSignal);
  EXPECT_EQ(r->decision.grace_ms, 12500);
  EXPECT_EQ(r->decision.min_runtime_ms, 60000);
  EXPECT_EQ(r->decision.steps, 5000);
  EXPECT_EQ(r->decision.checkpoint_every, 250);
  EXPECT_EQ(r->decision.tenant, "vision");
  // Without a tenant the program still follows (an empty tenant is written before it).
  d.tenant.clear();
  r = decode_record(encode_decision_record(d, 9));
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->decision.tenant, "");
  EXPECT_EQ(r->decision.command, d.command);
  // A negative environment count is refused: it is the 8 bytes before the two entries (each a
  // length and its bytes: 8 + 3, 8 + 2).
  auto rec = encode_decision_record(d, 9);
  set_i64(rec, rec.size() - 21 - 8, -1);
  ExpectDecodeError(rec, "environment count out of range");
  // An unknown preemption mode is refused.
  d.mode = static_cast<spec::Preemption>(7);
  ExpectDecodeError(encode_decision_record(d, 9), "unknown preemption mode 7");
}

// A journal written before users' programs named a built-in workload; it decodes as that
// workload's command, so an old journal still rebuilds every job.
TEST(DecisionCodecTest, AnOldWorkloadSubmitDecodesAsItsCommand) {
  auto d = Decision::submit("train", spec::Tier::kBasic, "H100", 4, 1, 4, 1024, "vision");
  auto rec = encode_decision_record(d, 9);
  auto put = [&](std::int64_t v) {
    for (int i = 0; i < 8; ++i) rec.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
  };
  auto put_str = [&](const std::string& s) {
    put(static_cast<std::int64_t>(s.size()));
    rec += s;
  };
  put_str("mlp");
  put(300);  // steps
  put(50);   // checkpoint_every
  put(1);
  put_str("--lr=0.1");
  auto r = decode_record(rec);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->decision.command, (std::vector<std::string>{"orrery-train-mlp", "--lr=0.1", "--steps=300"}));
  EXPECT_EQ(r->decision.mode, spec::Preemption::kTransparent);
  EXPECT_EQ(r->decision.checkpoint_every, 50);
}

TEST(DecisionCodecTest, OriginRoundTrips) {
  for (auto o : {spec::Origin::kPlanner, spec::Origin::kRuntime, spec::Origin::kOperator}) {
    Decision d;
    d.event = spec::EventKind::kPreempt;
    d.origin = o;
    d.job = 3;
    auto r = decode_record(encode_decision_record(d, 7));
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->decision.origin, o);
  }
}

TEST(DecisionCodecTest, TenantRoundTripsAndARecordWithoutOneIsTheDefaultTenant) {
  auto d = full_decision(EventKind::kSubmit);
  const auto without = encode_decision_record(d, 5);
  d.tenant = "team-a\n\xff";
  const auto with = encode_decision_record(d, 5);
  // The tenant is the record's last field, only when set: a record without one is byte for byte
  // what journals written before tenants existed hold.
  EXPECT_EQ(with.rfind(without, 0), 0u);
  auto r = decode_record(with);
  ASSERT_TRUE(r.ok()) << r.reason();
  ExpectSameDecision(r->decision, d);
  auto old = decode_record(without);
  ASSERT_TRUE(old.ok()) << old.reason();
  EXPECT_EQ(old->decision.tenant, "");
  EXPECT_NE(d.describe().find("tenant team-a"), std::string::npos) << d.describe();
}

TEST(DecisionDecodeErrorTest, TrailingBytes) {
  auto rec = plain_record();
  // After the devices, what follows is the tenant: a length and that many bytes, then nothing.
  ExpectDecodeError(rec + '\0', "record ends inside field 'tenant'");
  ExpectDecodeError(rec + "garbage!", "bad length for field 'tenant'");
  auto t = full_decision(EventKind::kSubmit);
  t.tenant = "x";
  // After a tenant comes the program (a tag, the mode, steps, ..., command, environment), if any.
  ExpectDecodeError(encode_decision_record(t, 0) + "!", "field 'program tag'");
  t.command = {"orrery-train-mlp", "--lr=0.1"};
  ExpectDecodeError(encode_decision_record(t, 0) + "!", "trailing bytes after decision");
  // A device count smaller than the devices that follow leaves bytes that are no tenant.
  set_i64(rec, kDevCount, 1);
  ExpectDecodeError(rec, "bad length for field 'tenant'");
}

TEST(DecisionDecodeErrorTest, BadStringLengths) {
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{1} << 40,
                           std::numeric_limits<std::int64_t>::min(),
                           std::numeric_limits<std::int64_t>::max(), std::int64_t{500}}) {
    auto rec = plain_record();
    set_i64(rec, kNameLen, bad);
    ExpectDecodeError(rec, "bad length for field 'name'");
    rec = plain_record();
    set_i64(rec, kTypeLen, bad);
    ExpectDecodeError(rec, "bad length for field 'device_type'");
  }
}

TEST(DecisionDecodeErrorTest, DeviceCountOutOfRange) {
  for (std::int64_t bad : {std::int64_t{-1}, (std::int64_t{1} << 20) + 1,
                           std::numeric_limits<std::int64_t>::max()}) {
    auto rec = plain_record();
    set_i64(rec, kDevCount, bad);
    ExpectDecodeError(rec, "device count out of range");
  }
  // In range but more than the record holds: truncated, not a huge allocation.
  auto rec = plain_record();
  set_i64(rec, kDevCount, std::int64_t{1} << 20);
  ExpectDecodeError(rec, "record ends inside field 'device'");
}

// Random bytes (with a decision kind byte, so decoding gets past the first check) and random
// mutations of a valid record: decode_record returns, whatever it returns, and an error always has
// a reason.
TEST(DecisionDecodeErrorTest, GarbageNeverCrashes) {
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> byte(0, 255);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes(static_cast<std::size_t>(rng() % 200), '\0');
    for (auto& c : bytes) c = static_cast<char>(byte(rng));
    if (!bytes.empty() && i % 2 == 0) bytes[0] = 'D';
    auto r = decode_record(bytes);
    if (!r.ok()) {
      ++errors;
      EXPECT_FALSE(r.reason().empty());
    }
  }
  EXPECT_GT(errors, 2000);
  const auto good = encode_decision_record(full_decision(EventKind::kResizeDown), 77);
  for (int i = 0; i < 3000; ++i) {
    auto bytes = good;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
      bytes[1 + rng() % (bytes.size() - 1)] = static_cast<char>(byte(rng));
    auto r = decode_record(bytes);
    if (!r.ok()) {
      EXPECT_FALSE(r.reason().empty());
    } else {
      EXPECT_LT(static_cast<std::uint64_t>(r->decision.event),
                std::uint64_t{spec::kNumEventKinds});
    }
  }
}

TEST(DecisionDescribeTest, OneLineSummaries) {
  Decision submit;
  submit.event = EventKind::kSubmit;
  submit.name = "resnet";
  submit.tier = spec::Tier::kPremium;
  submit.world = 8;
  submit.min_devices = 2;
  submit.max_devices = 4;
  submit.device_type = "H100-80G";
  EXPECT_EQ(submit.describe(), "Submit 'resnet' premium W=8 devices=[2,4] H100-80G");

  Decision preempt;
  preempt.event = EventKind::kPreempt;
  preempt.job = 2;
  preempt.beneficiary = 3;
  EXPECT_EQ(preempt.describe(), "Preempt job 2 for job 3");

  Decision place;
  place.event = EventKind::kPlace;
  place.job = 0;
  place.devices = {4, 5};
  place.splice = 2;
  EXPECT_EQ(place.describe(), "Place job 0 on {4,5} x2");

  Decision progress;
  progress.event = EventKind::kProgress;
  progress.job = 1;
  progress.step = 10;
  progress.gpu_ms = 500;
  EXPECT_EQ(progress.describe(), "Progress job 1 step 10 +500 gpu-ms");

  Decision migrate;
  migrate.event = EventKind::kMigrate;
  migrate.job = 1;
  migrate.devices = {6};
  migrate.splice = 4;
  EXPECT_EQ(migrate.describe(), "Migrate job 1 on {6} x4");
}

}  // namespace
}  // namespace orrery::core
