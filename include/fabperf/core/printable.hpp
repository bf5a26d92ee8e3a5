// Text that came from a peer (an agent's names, warnings and errors, a coordinator's ERROR, an
// rdma_cm reject, a counter's name) on its way to a log, a terminal or a report: control
// characters are shown as \xNN, the C1 range (U+0080..U+009F, which some terminals obey as escape
// sequences) and Unicode's direction controls (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F,
// U+061C, which reorder what a reader sees) as \uNNNN, and bytes that are not well-formed UTF-8
// as \xNN each. Everything else (printable UTF-8) is kept as it is.
#pragma once

#include <string>
#include <string_view>

namespace fabperf {

std::string printable(std::string_view s);

}  // namespace fabperf
