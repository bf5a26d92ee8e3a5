// Reading the interactive shell's lines: with line editing and a history file
// (~/.fabperf_history) through libedit on a terminal, plain std::getline otherwise (pipes,
// files, builds without libedit).
#pragma once

#include <memory>
#include <string>

namespace fabperf {

class LineReader {
 public:
  virtual ~LineReader() = default;
  // Shows the prompt (terminals only) and reads one line; false at end of input.
  virtual bool read(const char* prompt, std::string& line) = 0;
};

// tty: stdin is a terminal. The editing reader loads and saves the history file.
std::unique_ptr<LineReader> make_line_reader(bool tty);

}  // namespace fabperf
