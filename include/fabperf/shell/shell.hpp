// `fabperf shell`: nsdperf's command language (server, client, test, ttime, buffsize, ...), its
// defaults and limits, and its one-line results followed by per-client "network delay times"
// blocks, so scripts and wrappers written for nsdperf keep working.
#pragma once

#include <string>
#include <vector>

namespace fabperf {

struct ShellOptions {
  std::vector<std::string> input_files;  // -i FILE (in order)
  std::vector<std::string> commands;     // commands given on the command line
  std::string key_file;                  // the shared key proven to every agent (empty: none)
};

// Runs the shell: command-line commands first, then -i files, then (when neither was given) the
// prompt on stdin. Returns the exit code: 0, or 2 when a script (-i or command line) had an
// error (the shell stops at the first one), or the test's code when a test failed.
int run_shell(const ShellOptions& options);

}  // namespace fabperf
