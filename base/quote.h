// How an error shows input from outside (a job name, a TOML key, a command-line argument, a file
// name): at most kMaxQuoted bytes of it, so that a 10 KB job name in a refusal does not flood the
// terminal or a log with itself. Pure functions, header-only (the job-spec check includes it without
// linking base).
//
//   quote_input("a b")            -> "a b"            (with the double quotes)
//   quote_input(10386 x 'a')      -> "aaaa...(64 bytes of a)..." (10386 bytes)
//   clip_input("/tmp/job.toml")   -> /tmp/job.toml    (bare: a file name before ":LINE:COL: ")
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace orrery {

inline constexpr std::size_t kMaxQuoted = 64;

namespace quote_detail {

inline std::string shown(std::string_view s, bool quotes) {
  std::size_t n = s.size();
  if (n > kMaxQuoted) {
    n = kMaxQuoted;
    // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx; at most 3).
    for (int i = 0; i < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++i) --n;
  }
  std::string out;
  if (quotes) out += '"';
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else if (quotes && (c == '"' || c == '\\')) {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...";
  if (quotes) out += '"';
  if (n < s.size()) out += " (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace quote_detail

// `s` in double quotes, with '"', '\' and control bytes escaped (\n, \t, \r, \xNN). Longer than
// kMaxQuoted bytes: its first kMaxQuoted bytes (not cutting a UTF-8 character in two), then
// `..."` and ` (N bytes)`, N being the whole input's length.
inline std::string quote_input(std::string_view s) { return quote_detail::shown(s, true); }

// The same without the quotes (and without escaping '"' and '\'), for input shown bare.
inline std::string clip_input(std::string_view s) { return quote_detail::shown(s, false); }

}  // namespace orrery
