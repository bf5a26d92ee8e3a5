// Subcommands that live in their own files (src/cli/cmd_NAME.cpp); main.cpp dispatches to them.
#pragma once

namespace fabperf {

int cmd_report(int argc, char** argv);  // cmd_report.cpp

}  // namespace fabperf
