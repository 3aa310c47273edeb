// Unit tests of orrery-check's bounds config (checker/bounds.h): defaults, overrides, and errors
// that name the line.
#include "checker/bounds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orrery::checker {
namespace {

void ExpectShape(const Shape& s, int jobs, int nodes, int devices_per_node) {
  EXPECT_EQ(s.jobs, jobs);
  EXPECT_EQ(s.nodes, nodes);
  EXPECT_EQ(s.devices_per_node, devices_per_node);
}

void ExpectDefaults(const Bounds& b) {
  ExpectShape(b.proof, 3, 2, 2);
  ExpectShape(b.bmc, 3, 2, 2);
  EXPECT_EQ(b.bmc_depth, 12);
  EXPECT_EQ(b.bmc_unroll, 6);
  EXPECT_EQ(b.timeout_ms, 60000u);
}

void ExpectError(const std::string& text, const std::vector<std::string>& needles) {
  SCOPED_TRACE(text);
  auto b = parse_bounds(text);
  ASSERT_FALSE(b.ok());
  for (const auto& n : needles)
    EXPECT_NE(b.reason().find(n), std::string::npos)
        << "reason '" << b.reason() << "' lacks '" << n << "'";
}

TEST(BoundsTest, EmptyTextGivesDefaults) {
  for (const char* text : {"", "\n\n", "# only a comment\n   \n\t# another\n"}) {
    auto b = parse_bounds(text);
    ASSERT_TRUE(b.ok()) << b.reason();
    ExpectDefaults(*b);
  }
}

TEST(BoundsTest, EveryKeyOverrides) {
  auto b = parse_bounds(
      "proof_jobs = 4\n"
      "proof_nodes=3\n"
      "  proof_devices_per_node   =   1   # trailing comment\n"
      "bmc_jobs = 1\n"
      "bmc_nodes = 4\n"
      "bmc_devices_per_node = 3\r\n"
      "bmc_depth = 0\n"
      "bmc_unroll = 7\n"
      "timeout_ms = 3600000");  // no final newline
  ASSERT_TRUE(b.ok()) << b.reason();
  ExpectShape(b->proof, 4, 3, 1);
  ExpectShape(b->bmc, 1, 4, 3);
  EXPECT_EQ(b->bmc_depth, 0);
  EXPECT_EQ(b->bmc_unroll, 7);
  EXPECT_EQ(b->timeout_ms, 3600000u);
}

TEST(BoundsTest, PartialOverrideKeepsOtherDefaults) {
  auto b = parse_bounds("bmc_depth = 20\n");
  ASSERT_TRUE(b.ok()) << b.reason();
  ExpectShape(b->proof, 3, 2, 2);
  ExpectShape(b->bmc, 3, 2, 2);
  EXPECT_EQ(b->bmc_depth, 20);
  EXPECT_EQ(b->bmc_unroll, 6);
  EXPECT_EQ(b->timeout_ms, 60000u);
}

TEST(BoundsTest, LaterLineWins) {
  auto b = parse_bounds("bmc_depth = 3\nbmc_depth = 5\n");
  ASSERT_TRUE(b.ok()) << b.reason();
  EXPECT_EQ(b->bmc_depth, 5);
}

TEST(BoundsTest, RangeLimitsAreInclusive) {
  for (const char* ok : {"proof_jobs = 1", "proof_jobs = 8", "bmc_jobs = 4", "bmc_depth = 64",
                         "timeout_ms = 1"}) {
    auto b = parse_bounds(ok);
    EXPECT_TRUE(b.ok()) << ok << ": " << b.reason();
  }
}

TEST(BoundsTest, UnknownKey) {
  ExpectError("proof_jobs = 3\nproof_job = 3\n", {"bounds line 2", "unknown key 'proof_job'"});
  ExpectError("# c\n\nDepth = 3\n", {"bounds line 3", "unknown key 'Depth'"});
  ExpectError("= 3\n", {"bounds line 1", "unknown key ''"});
}

TEST(BoundsTest, OutOfRange) {
  ExpectError("proof_jobs = 9\n", {"bounds line 1", "proof_jobs must be an integer in [1, 8]",
                                   "got '9'"});
  ExpectError("proof_nodes = 0\n", {"proof_nodes must be an integer in [1, 8]"});
  ExpectError("bmc_jobs = 5\n", {"bmc_jobs must be an integer in [1, 4]"});
  ExpectError("x\n#\nbmc_depth = -1\n", {"bounds line 1"});  // the first bad line is reported
  ExpectError("\nbmc_depth = -1\n", {"bounds line 2", "bmc_depth must be an integer in [0, 64]"});
  ExpectError("bmc_depth = 65\n", {"bmc_depth must be an integer in [0, 64]"});
  ExpectError("bmc_unroll = -2\n", {"bmc_unroll must be an integer in [0, 64]"});
  ExpectError("timeout_ms = 0\n", {"timeout_ms must be an integer in [1, 3600000]"});
  ExpectError("timeout_ms = 3600001\n", {"timeout_ms must be an integer in [1, 3600000]"});
  ExpectError("timeout_ms = 99999999999999999999\n", {"timeout_ms must be an integer"});
}

TEST(BoundsTest, GarbageValues) {
  for (const char* bad : {"proof_jobs = three", "proof_jobs = 3x", "proof_jobs =", "proof_jobs = 3 4",
                          "proof_jobs = 2.5", "proof_jobs = +3", "proof_jobs = 3 = 4"})
    ExpectError(bad, {"bounds line 1", "proof_jobs must be an integer in [1, 8]"});
}

TEST(BoundsTest, LineWithoutEquals) {
  ExpectError("proof_jobs 3\n", {"bounds line 1", "expected key = value"});
  ExpectError("bmc_depth = 2\n\n  bmc_jobs\n", {"bounds line 3", "expected key = value"});
}

TEST(BoundsTest, ShippedConfigIsTheDefaults) {
  auto b = load_bounds(std::string(ORRERY_SOURCE_DIR) + "/checker/bounds.conf");
  ASSERT_TRUE(b.ok()) << b.reason();
  ExpectDefaults(*b);
}

TEST(BoundsTest, LoadErrorsNameThePath) {
  auto missing = load_bounds("/nonexistent/bounds.conf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.reason().find("/nonexistent/bounds.conf"), std::string::npos)
      << missing.reason();
}

}  // namespace
}  // namespace orrery::checker
