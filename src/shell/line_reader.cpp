#include "shell/line_reader.hpp"

#include <cstdlib>
#include <iostream>

#if FABPERF_HAVE_LIBEDIT
#include <editline/readline.h>
#include <cstdio>  // editline/readline.h needs FILE
#endif

namespace fabperf {
namespace {

class PlainReader final : public LineReader {
 public:
  explicit PlainReader(bool tty) : tty_(tty) {}
  bool read(const char* prompt, std::string& line) override {
    if (tty_) std::cout << prompt << std::flush;
    return static_cast<bool>(std::getline(std::cin, line));
  }

 private:
  bool tty_;
};

#if FABPERF_HAVE_LIBEDIT
class EditReader final : public LineReader {
 public:
  explicit EditReader(std::string path) : path_(std::move(path)) {
    using_history();
    stifle_history(kMaxHistory);
    if (!path_.empty()) (void)read_history(path_.c_str());  // a missing file is a first session
  }
  ~EditReader() override {
    // Saved on every line too: a shell ended by a signal keeps its history.
    save();
  }
  EditReader(const EditReader&) = delete;
  EditReader& operator=(const EditReader&) = delete;

  bool read(const char* prompt, std::string& line) override {
    char* raw = readline(prompt);
    if (raw == nullptr) {
      std::cout << "\n";
      return false;
    }
    line = raw;
    std::free(raw);
    // Blank lines and immediate repeats would only clutter the recall list.
    if (line.find_first_not_of(" \t") != std::string::npos && line != last_) {
      add_history(line.c_str());
      last_ = line;
      save();
    }
    return true;
  }

 private:
  void save() const {
    if (!path_.empty()) (void)write_history(path_.c_str());
  }
  static constexpr int kMaxHistory = 1000;
  std::string path_;
  std::string last_;
};

// Where the history is kept: $FABPERF_HISTORY, else $HOME/.fabperf_history ("" when neither).
std::string history_file() {
  if (const char* p = std::getenv("FABPERF_HISTORY"); p != nullptr && *p != '\0') return p;
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return std::string(h) + "/.fabperf_history";
  return {};
}
#endif

}  // namespace

std::unique_ptr<LineReader> make_line_reader(bool tty) {
#if FABPERF_HAVE_LIBEDIT
  if (tty) return std::make_unique<EditReader>(history_file());
#endif
  return std::make_unique<PlainReader>(tty);
}

}  // namespace fabperf
