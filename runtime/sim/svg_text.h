// Text in orrery-sim's SVG charts (svg_plot.h): escaping any string into a well-formed document,
// and the width estimate the layout spaces labels by. Exposed for tests.
#pragma once

#include <string>
#include <string_view>

namespace orrery::sim::plot {

// Text as XML character data or attribute value: & < > " ' escaped, control characters other
// than tab and newline and invalid UTF-8 bytes replaced by U+FFFD.
std::string xml_escape(std::string_view text);
// An estimate of a text's width in px at font size `font`: the advances of DejaVu Sans, in em,
// rounded up (the first font the documents name, and wider than Helvetica or Arial, so labels
// spaced by it do not overlap in those either). Used to keep labels apart, lay out the legend
// and size the margins.
double text_width(std::string_view text, double font);

}  // namespace orrery::sim::plot
