// Subcommands that live in their own files (main.cpp only dispatches to them).
#pragma once

namespace fabperf::cli {

// `fabperf report RESULTS --format text|json|csv|junit|html` (cmd_report.cpp)
int cmd_report(int argc, char** argv);

}  // namespace fabperf::cli
