// A small CSV reader for trace files: a header row naming the columns, then one record per line.
// Columns are found by header name, so a file's column order does not matter.
//
// Accepted: fields separated by ',', optionally in double quotes ("" inside quotes is one quote,
// a quoted field may hold commas); blanks around unquoted fields and header names are trimmed;
// CRLF or LF line ends; a UTF-8 byte-order mark before the header; blank lines (skipped).
// Refused, as errors naming PATH:LINE: an empty file, a header naming a column twice or an empty
// column name, a record with more or fewer fields than the header, an unterminated quote (a
// quoted field cannot span lines), text after a closing quote.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace orrery::sim {

class CsvReader {
 public:
  // Opens `path` and reads its header.
  static Result<CsvReader> open(const std::string& path);

  const std::vector<std::string>& header() const { return header_; }
  // The index of the column named `name`, -1 when the header has none.
  int column(std::string_view name) const;

  // Reads the next record: true when there is one, false at the end of the file, or an error.
  Result<bool> next();
  // Field `i` of the current record (0 <= i < header().size()).
  std::string_view field(int i) const { return fields_[static_cast<std::size_t>(i)]; }
  // The line of the current record (1 is the header).
  int line() const { return line_; }
  const std::string& path() const { return path_; }
  // "PATH:LINE: what", for errors about the current record.
  Status error(const std::string& what) const;

 private:
  CsvReader() = default;
  // Splits `text` into fields_; the reason on bad quoting.
  Status split(std::string_view text);

  std::string path_;
  std::unique_ptr<std::ifstream> in_;
  std::vector<std::string> header_;
  std::vector<std::string> fields_;
  std::string buf_;
  int line_ = 0;
};

// Field values: a whole decimal integer in [lo, hi], or a finite decimal number >= 0 (seconds);
// false when `text` is anything else (empty included).
bool parse_int_field(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out);
bool parse_seconds_field(std::string_view text, double& out);

}  // namespace orrery::sim
