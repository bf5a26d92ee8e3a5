// Text that came from a peer (an agent's names, warnings and errors, a coordinator's ERROR, an
// rdma_cm reject) on its way to a log, a terminal or a report: control characters, including
// the C1 range (U+0080..U+009F, which some terminals obey as escape sequences), are shown as
// \xNN instead of acting. Everything else (printable UTF-8) is kept as it is.
#pragma once

#include <string>
#include <string_view>

namespace fabperf {

std::string printable(std::string_view s);

}  // namespace fabperf
