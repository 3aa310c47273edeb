// The device types' relative speeds as given on the command line (core/policy/type_speed.h).
#include <gtest/gtest.h>

#include "core/policy/type_speed.h"

namespace orrery::core::policy {
namespace {

TEST(TypeSpeed, ParsesNamesAndSpeeds) {
  auto s = parse_type_speed("H100-80G=2,A100-80G=1,T4=0.25");
  ASSERT_TRUE(s.ok()) << s.reason();
  EXPECT_EQ(*s, (std::map<std::string, double>{{"A100-80G", 1.0}, {"H100-80G", 2.0}, {"T4", 0.25}}));
  auto one = parse_type_speed("G2=1000");
  ASSERT_TRUE(one.ok()) << one.reason();
  EXPECT_EQ(one->at("G2"), 1000.0);
}

TEST(TypeSpeed, RefusesWhatIsNotNameEqualsSpeed) {
  auto reason = [](std::string_view text) {
    auto s = parse_type_speed(text);
    EXPECT_FALSE(s.ok()) << text;
    return s.ok() ? std::string() : s.reason();
  };
  EXPECT_NE(reason("").find("\"\" has no '='"), std::string::npos);
  EXPECT_NE(reason("H100").find("\"H100\" has no '='"), std::string::npos);
  EXPECT_NE(reason("H100=2,").find("\"\" has no '='"), std::string::npos);
  EXPECT_NE(reason("a b=2").find("\"a b\" is not a device type name"), std::string::npos);
  EXPECT_NE(reason("=2").find("\"\" is not a device type name"), std::string::npos);
  for (const char* num : {"0", "-1", "1001", "x", "2x", "nan", "inf", ""})
    EXPECT_NE(reason(std::string("H100=") + num).find("the speed of H100 must be a number in (0, 1000]"), std::string::npos)
        << num;
  EXPECT_NE(reason("H100=2,H100=3").find("H100 is given twice"), std::string::npos);
}

}  // namespace
}  // namespace orrery::core::policy
