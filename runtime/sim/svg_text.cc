// Text in orrery-sim's SVG charts (svg_text.h).
#include "runtime/sim/svg_text.h"

#include <cstddef>
#include <cstdint>

namespace orrery::sim::plot {

namespace {

// The advance of c in DejaVu Sans, in em, rounded up (text_width, svg_text.h).
double char_em(char32_t c) {
  auto in = [c](std::string_view set) {
    return c < 0x80 && set.find(static_cast<char>(c)) != set.npos;
  };
  if (c >= '0' && c <= '9') return 0.64;
  if (in(" .,:;!'|ijlI")) return 0.32;
  if (in("()[]-/ftr")) return 0.42;
  if (in("mw%")) return 0.98;
  if (in("MW")) return 1.0;
  if (c >= 'a' && c <= 'z') return 0.63;
  if (c >= 'A' && c <= 'Z') return 0.76;
  if (c < 0x80) return 0.84;  // other ASCII symbols: & @ # _ ...
  return 1.0;                 // others, CJK included
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n') {
            out += kReplacement;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then the code point, which must be
    // the shortest encoding and a character XML allows.
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      const std::uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min_cp && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE &&
           cp != 0xFFFF;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;  // resynchronise on the next byte
    }
  }
  return out;
}

double text_width(std::string_view s, double font) {
  double em = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation bytes: counted with their lead byte
    em += char_em(c < 0x80 ? c : 0x100);
  }
  return em * font;
}

}  // namespace orrery::sim::plot
