#include "runtime/sim/csv_reader.h"

#include <charconv>
#include <cmath>

namespace orrery::sim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool blank(std::string_view s) { return trim(s).empty(); }

}  // namespace

Result<CsvReader> CsvReader::open(const std::string& path) {
  CsvReader r;
  r.path_ = path;
  r.in_ = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*r.in_) return Status::Error(path + ": cannot open");
  // The header: the first non-blank line.
  while (true) {
    if (!std::getline(*r.in_, r.buf_)) {
      if (r.in_->bad()) return Status::Error(path + ": read error");
      return Status::Error(path + ": empty file (expected a header line naming the columns)");
    }
    ++r.line_;
    if (r.line_ == 1 && r.buf_.starts_with("\xEF\xBB\xBF")) r.buf_.erase(0, 3);
    if (!r.buf_.empty() && r.buf_.back() == '\r') r.buf_.pop_back();
    if (!blank(r.buf_)) break;
  }
  if (auto st = r.split(r.buf_); !st.ok()) return r.error("header: " + st.reason());
  r.header_ = r.fields_;
  for (std::size_t i = 0; i < r.header_.size(); ++i) {
    if (r.header_[i].empty())
      return r.error("header: column " + std::to_string(i + 1) + " has no name");
    for (std::size_t j = 0; j < i; ++j)
      if (r.header_[j] == r.header_[i])
        return r.error("header: column \"" + r.header_[i] + "\" named twice");
  }
  return r;
}

int CsvReader::column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return static_cast<int>(i);
  return -1;
}

Status CsvReader::error(const std::string& what) const {
  return Status::Error(path_ + ":" + std::to_string(line_) + ": " + what);
}

Result<bool> CsvReader::next() {
  while (std::getline(*in_, buf_)) {
    ++line_;
    if (!buf_.empty() && buf_.back() == '\r') buf_.pop_back();
    if (blank(buf_)) continue;
    if (auto st = split(buf_); !st.ok()) return error(st.reason());
    if (fields_.size() != header_.size())
      return error(std::to_string(fields_.size()) + " fields, the header has " +
                   std::to_string(header_.size()));
    return true;
  }
  if (in_->bad()) return error("read error");
  return false;
}

Status CsvReader::split(std::string_view text) {
  fields_.clear();
  std::size_t i = 0;
  while (true) {
    // One field, starting at i.
    std::size_t j = i;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j < text.size() && text[j] == '"') {
      std::string value;
      std::size_t k = j + 1;
      while (true) {
        if (k >= text.size())
          return Status::Error("field " + std::to_string(fields_.size() + 1) +
                               ": unterminated quote (a quoted field cannot span lines)");
        if (text[k] == '"') {
          if (k + 1 < text.size() && text[k + 1] == '"') {
            value += '"';
            k += 2;
            continue;
          }
          ++k;
          break;
        }
        value += text[k++];
      }
      while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
      if (k < text.size() && text[k] != ',')
        return Status::Error("field " + std::to_string(fields_.size() + 1) +
                             ": text after the closing quote");
      fields_.push_back(std::move(value));
      if (k >= text.size()) return Status::Ok();
      i = k + 1;
    } else {
      const std::size_t comma = text.find(',', i);
      const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
      const std::string_view f = trim(text.substr(i, end - i));
      if (f.find('"') != std::string_view::npos)
        return Status::Error("field " + std::to_string(fields_.size() + 1) +
                             ": a quote inside an unquoted field");
      fields_.emplace_back(f);
      if (comma == std::string_view::npos) return Status::Ok();
      i = comma + 1;
    }
  }
}

bool parse_int_field(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

bool parse_seconds_field(std::string_view text, double& out) {
  // from_chars accepts "inf" and "nan": refused below; a leading '+' it refuses, as wanted.
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty() || !std::isfinite(v) ||
      v < 0)
    return false;
  out = v;
  return true;
}

}  // namespace orrery::sim
