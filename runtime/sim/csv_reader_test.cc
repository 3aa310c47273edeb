// CsvReader: columns by header name, quoting, line ends, and errors that name PATH:LINE.
#include "runtime/sim/csv_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/sim/sim_test_util.h"

namespace orrery::sim {
namespace {

using testing::TempDir;

std::vector<std::vector<std::string>> read_all(const std::string& path, std::string* error = nullptr) {
  std::vector<std::vector<std::string>> rows;
  auto r = CsvReader::open(path);
  if (!r) {
    if (error) *error = r.reason();
    return rows;
  }
  rows.push_back(r->header());
  while (true) {
    auto more = r->next();
    if (!more) {
      if (error) *error = more.reason();
      return rows;
    }
    if (!*more) return rows;
    std::vector<std::string> row;
    for (std::size_t i = 0; i < r->header().size(); ++i) row.emplace_back(r->field(static_cast<int>(i)));
    rows.push_back(row);
  }
}

TEST(CsvReaderTest, QuotesBlanksCrlfBomAndBlankLines) {
  TempDir dir;
  const auto p = dir.write("a.csv",
                           "\xEF\xBB\xBF" "a, b ,c\r\n"
                           "1,\"x, y\",\"say \"\"hi\"\"\"\r\n"
                           "\r\n"
                           "   \n"
                           " 2 ,, \"\" \n");
  std::string err;
  auto rows = read_all(p, &err);
  ASSERT_EQ(err, "");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "x, y", "say \"hi\""}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"2", "", ""}));
}

TEST(CsvReaderTest, ColumnsByName) {
  TempDir dir;
  auto r = CsvReader::open(dir.write("a.csv", "z,y,x\n1,2,3\n"));
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->column("x"), 2);
  EXPECT_EQ(r->column("z"), 0);
  EXPECT_EQ(r->column("w"), -1);
  ASSERT_TRUE(*r->next());
  EXPECT_EQ(r->field(r->column("x")), "3");
  EXPECT_EQ(r->line(), 2);
  EXPECT_FALSE(*r->next());
}

TEST(CsvReaderTest, ErrorsNameFileAndLine) {
  TempDir dir;
  struct Case {
    std::string text, error;
  } cases[] = {
      {"", "empty file"},
      {"a,b\n1,2\n\n3\n", "a.csv:4: 1 fields, the header has 2"},
      {"a,b\n1,2,3\n", "a.csv:2: 3 fields, the header has 2"},
      {"a,a\n", "a.csv:1: header: column \"a\" named twice"},
      {"a,,b\n", "a.csv:1: header: column 2 has no name"},
      {"a,b\n1,\"2\n", "a.csv:2: field 2: unterminated quote"},
      {"a,b\n\"1\"x,2\n", "a.csv:2: field 1: text after the closing quote"},
      {"a,b\n1,2\"\n", "a.csv:2: field 2: a quote inside an unquoted field"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    std::string err;
    read_all(dir.write("a.csv", c.text), &err);
    EXPECT_NE(err.find(c.error), std::string::npos) << err;
  }
  std::string err;
  read_all("/nonexistent/x.csv", &err);
  EXPECT_EQ(err, "/nonexistent/x.csv: cannot open");
}

TEST(CsvReaderTest, FieldParsers) {
  std::int64_t v = -1;
  EXPECT_TRUE(parse_int_field("42", 0, 100, v));
  EXPECT_EQ(v, 42);
  for (const char* bad : {"", "-1", "101", "4 2", "4.0", "+4", "x"}) EXPECT_FALSE(parse_int_field(bad, 0, 100, v)) << bad;
  double s = -1;
  EXPECT_TRUE(parse_seconds_field("12.5", s));
  EXPECT_EQ(s, 12.5);
  EXPECT_TRUE(parse_seconds_field("12537496", s));
  EXPECT_EQ(s, 12537496.0);
  for (const char* bad : {"", "-1", "inf", "nan", "1s", " 1"}) EXPECT_FALSE(parse_seconds_field(bad, s)) << bad;
}

}  // namespace
}  // namespace orrery::sim
