// quote_input / clip_input: short input whole and escaped, long input cut at kMaxQuoted bytes with
// its length, never in the middle of a UTF-8 character.
#include "base/quote.h"

#include <gtest/gtest.h>

#include <string>

namespace orrery {
namespace {

TEST(Quote, ShortInputWholeAndEscaped) {
  EXPECT_EQ(quote_input("train-a"), "\"train-a\"");
  EXPECT_EQ(quote_input(""), "\"\"");
  EXPECT_EQ(quote_input("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\x01\"");
  EXPECT_EQ(clip_input("/tmp/a \"b\".toml"), "/tmp/a \"b\".toml");
  const std::string exact(kMaxQuoted, 'x');
  EXPECT_EQ(quote_input(exact), "\"" + exact + "\"");
}

TEST(Quote, LongInputCutAtSixtyFourBytesWithItsLength) {
  const std::string name(10386, 'a');
  EXPECT_EQ(quote_input(name), "\"" + std::string(64, 'a') + "...\" (10386 bytes)");
  EXPECT_EQ(clip_input(name), std::string(64, 'a') + "... (10386 bytes)");
  EXPECT_EQ(quote_input(std::string(65, 'b')), "\"" + std::string(64, 'b') + "...\" (65 bytes)");
}

TEST(Quote, NeverCutsAUtf8Character) {
  // 63 ASCII bytes, then a 3-byte character across the 64-byte mark: the whole character goes.
  const std::string s = std::string(63, 'a') + "\xE2\x82\xAC" + std::string(10, 'b');
  EXPECT_EQ(quote_input(s), "\"" + std::string(63, 'a') + "...\" (76 bytes)");
  const std::string t = std::string(62, 'a') + "\xC3\xA9" + "zz";  // 2-byte character fits
  EXPECT_EQ(clip_input(t), std::string(62, 'a') + "\xC3\xA9... (66 bytes)");
}

}  // namespace
}  // namespace orrery
