#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/shell/shell.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#if FABPERF_HAVE_LIBEDIT
#include <editline/readline.h>
#include <cstdio>  // editline/readline.h needs FILE
#endif

namespace fabperf {
namespace {

// One command: its full name and handler. Any unambiguous prefix of the name is accepted.
struct Command {
  const char* name;
  const char* help;
};

constexpr Command kCommands[] = {
    {"server", "server HOST...       add server nodes"},
    {"client", "client HOST...       add client nodes"},
    {"delete", "delete HOST...       remove nodes"},
    {"reset", "reset                remove all nodes, restore every default"},
    {"test", "test [write|read|nwrite|swrite|sread|rw]...   run tests (none given: nwrite, then read)"},
    // nsdperf's names of test settings: their help is the settings table's (setting_help).
    {"ttime", nullptr},
    {"buffsize", nullptr},
    {"socksize", nullptr},
    {"threads", nullptr},
    {"parallel", nullptr},
    {"rdma", "rdma on|off          RDMA verbs transport for the data (--transport rdma)"},
    {"usecm", "usecm on|off         connect RDMA queue pairs with librdmacm (--rdma-cm)"},
    {"sinline", "sinline on|off       accepted; nothing to inline (see help text)"},
    {"maxrdma", "maxrdma N            accepted; ports are chosen by test address"},
    {"hist", "hist on|off          print block transmit time histograms"},
    {"verify", nullptr},
    {"plot", "plot FILE            write the last test's throughput over time to FILE"},
    {"check", "check                connect to every node, report versions and clock offsets"},
    {"set",
     "set NAME VALUE       any other test setting by its 'fabperf run' name, e.g. set send-method write ('set' lists "
     "them)"},
    {"status", "status               show nodes and settings"},
    {"version", "version              show the version"},
    {"debug", "debug [LEVEL]        set the log level (0 off .. 3 debug)"},
    {"source", "source FILE          run commands from FILE"},
    {"kill", "kill HOST...         stop the agents on these nodes"},
    {"killall", "killall              stop the agents on every node"},
    {"quit", "quit                 leave"},
    {"exit", "exit                 leave"},
    {"help", "help                 this list"},
};

struct ShellError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A command that is nsdperf's name of a test setting, described by the settings table's row.
std::string setting_help(const std::string& name) {
  for (const auto& st : spec_settings()) {
    if (name != st.nsdperf) continue;
    const auto arg = fmt::format("{} {}", name, st.kind == SettingKind::flag ? "on|off" : st.value);
    return fmt::format("{:<20} {} (default {})", arg, st.help, st.deflt);
  }
  return name;  // every nullptr help in kCommands names a row (Shell.HelpListsEveryCommand)
}

std::string resolve_command(const std::string& word) {
  std::vector<std::string> hits;
  for (const auto& c : kCommands) {
    std::string n = c.name;
    if (n == word) return n;
    if (n.rfind(word, 0) == 0) hits.push_back(n);
  }
  if (hits.size() == 1) return hits.front();
  if (hits.empty()) throw ShellError(fmt::format("Unknown command '{}' (type 'help')", word));
  throw ShellError(fmt::format("Ambiguous command '{}': {}", word, fmt::join(hits, ", ")));
}

bool on_off(const std::vector<std::string>& args, const std::string& cmd) {
  if (args.size() != 1 || (args[0] != "on" && args[0] != "off")) throw ShellError(fmt::format("Usage: {} on|off", cmd));
  return args[0] == "on";
}

// A command's argument errors are the shell's own: reported, and the exit code left as it was.
template <typename F>
auto checked(F&& f) {
  try {
    return f();
  } catch (const UsageError& e) {
    throw ShellError(e.what());
  }
}

std::int64_t number(const std::vector<std::string>& args, const std::string& cmd, std::int64_t lo, std::int64_t hi) {
  if (args.size() != 1) throw ShellError(fmt::format("Usage: {} N", cmd));
  return checked([&] { return parse_int(args[0], cmd, lo, hi); });
}

}  // namespace

class ShellSession {
 public:
  ShellSession(std::ostream& out, std::ostream& err, const std::string& key_file) : out_(out), err_(err) {
    if (!key_file.empty()) key_ = auth::load_key_file(key_file);
  }

  // Runs every command of one line. Returns false on the first error (already printed).
  bool line(const std::string& text) {
    for (const auto& cmd : split_commands(text)) {
      if (quit_) return true;
      try {
        execute(cmd);
      } catch (const ShellError& e) {
        err_ << e.what() << "\n";
        return false;
      } catch (const Error& e) {
        err_ << e.what() << "\n";
        last_code_ = static_cast<int>(e.code());
        return false;
      }
    }
    return true;
  }
  [[nodiscard]] bool quit() const { return quit_; }
  // The exit code after a failed line: the last test's, else a usage error's.
  [[nodiscard]] int fail_code() const { return last_code_ ? last_code_ : static_cast<int>(ExitCode::usage); }

  // Runs a file's lines (each `nest` deeper in sources) until quit: 0, or the number of the line
  // that failed (reported already). Throws ShellError when the file cannot be opened.
  int run_file(const std::string& path, int nest) {
    std::ifstream in(path);
    if (!in) throw ShellError(fmt::format("Cannot open {}", path));
    std::string l;
    for (int n = 1; std::getline(in, l) && !quit_; ++n) {
      depth_ += nest;
      const bool ok = line(l);
      depth_ -= nest;
      if (!ok) return n;
    }
    return 0;
  }

 private:
  // ';' separates commands, as does a '/' standing alone; '#' starts a comment.
  static std::vector<std::vector<std::string>> split_commands(const std::string& text) {
    std::string t = text.substr(0, text.find('#'));
    std::vector<std::vector<std::string>> out(1);
    std::istringstream in(t);
    std::string w;
    while (in >> w) {
      const auto parts = split_list(w, ';');
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out.emplace_back();
        if (parts[i] == "/") {
          out.emplace_back();
        } else if (!parts[i].empty()) {
          out.back().push_back(parts[i]);
        }
      }
    }
    std::erase_if(out, [](const auto& v) { return v.empty(); });
    return out;
  }

  void say(const std::string& s) { out_ << s << "\n"; }

  static HostPort host(const std::string& text) {
    HostPort hp = checked([&] { return parse_host_port(text, "host"); });
    if (const char* why = resolve_error(hp.host))
      throw ShellError(fmt::format("Cannot find address for host {} ({})", hp.host, why));
    return hp;
  }

  static bool same(const HostPort& a, const HostPort& b) { return a.host == b.host && a.port == b.port; }

  // Removes the node from both lists; false when it was in neither.
  bool forget(const HostPort& hp) {
    const auto is = [&](const HostPort& x) { return same(x, hp); };
    return std::erase_if(servers_, is) + std::erase_if(clients_, is) > 0;
  }

  void add_nodes(std::vector<HostPort>& to, const std::vector<HostPort>& other, const std::vector<std::string>& args,
                 const char* role) {
    if (args.empty()) throw ShellError(fmt::format("Usage: {} HOST...", role));
    for (const auto& a : args) {
      const HostPort hp = host(a);
      if (std::any_of(other.begin(), other.end(), [&](const HostPort& x) { return same(x, hp); })) {
        throw ShellError(
            fmt::format("{} is already a {}", hp.str(), role == std::string("server") ? "client" : "server"));
      }
      if (std::none_of(to.begin(), to.end(), [&](const HostPort& x) { return same(x, hp); })) {
        to.push_back(hp);
        say(fmt::format("Added {} {}", role, hp.str()));
      }
    }
  }

  // nsdperf's commands for five test settings: the table's parsers, nsdperf's replies and range errors.
  void set_nsdperf(const std::string& cmd, const std::vector<std::string>& args) {
    const bool bytes = cmd == "buffsize" || cmd == "socksize";
    if (args.size() != 1) throw ShellError(fmt::format("Usage: {} {}", cmd, bytes ? "BYTES" : "N"));
    SpecParams p = p_;
    checked([&] {
      if (cmd == "ttime") {
        p.time = std::chrono::seconds(
            parse_int(args[0], cmd, 1, std::chrono::duration_cast<std::chrono::seconds>(limits::kMaxTime).count()));
      } else {
        find_setting(cmd)->apply(p, args[0], cmd);
      }
    });
    if (cmd == "buffsize" && (*p.buffsize < limits::kMinBuffsize || *p.buffsize > limits::kMaxBuffsize)) {
      throw ShellError(
          fmt::format("Buffer size {} out of range ({}..{})", *p.buffsize, limits::kMinBuffsize, limits::kMaxBuffsize));
    }
    if (cmd == "socksize" && *p.socksize > limits::kMaxSocksize)
      throw ShellError(fmt::format("Socket buffer size {} out of range (0..{})", *p.socksize, limits::kMaxSocksize));
    p_ = p;
    say(cmd == "ttime"      ? fmt::format("Test time set to {} seconds",
                                          std::chrono::duration_cast<std::chrono::seconds>(*p.time).count())
        : cmd == "buffsize" ? fmt::format("Buffer size set to {} bytes", *p.buffsize)
        : cmd == "socksize"
            ? (*p.socksize_auto
                   ? "Socket buffer size set to auto (twice the bandwidth-delay product of the slowest link)"
                   : fmt::format("Socket buffer size set to {} bytes", *p.socksize))
        : cmd == "threads" ? fmt::format("Number of tester threads set to {}", *p.threads)
                           : fmt::format("Number of parallel connections set to {}", *p.parallel));
  }

  void execute(const std::vector<std::string>& words) {
    const std::string cmd = resolve_command(words[0]);
    const std::vector<std::string> args(words.begin() + 1, words.end());
    if (cmd == "server") {
      add_nodes(servers_, clients_, args, "server");
    } else if (cmd == "client") {
      add_nodes(clients_, servers_, args, "client");
    } else if (cmd == "delete") {
      if (args.empty()) throw ShellError("Usage: delete HOST...");
      for (const auto& a : args) {
        const HostPort hp = host(a);
        if (!forget(hp)) throw ShellError(fmt::format("{} is not a node", hp.str()));
        say(fmt::format("Deleted {}", hp.str()));
      }
    } else if (cmd == "reset") {
      servers_.clear();
      clients_.clear();
      p_ = SpecParams{};
      hist_ = false;
      usecm_ = false;
      say("Reset to defaults, all nodes deleted");
    } else if (cmd == "ttime" || cmd == "buffsize" || cmd == "socksize" || cmd == "threads" || cmd == "parallel") {
      set_nsdperf(cmd, args);
    } else if (cmd == "rdma") {
      if (args.size() != 1 || (args[0] != "on" && args[0] != "off" && args[0] != "all" && args[0] != "inline")) {
        throw ShellError("Usage: rdma on|off|all|inline");
      }
      if (args[0] == "off") {
        p_.transport = Transport::tcp;
        say("RDMA off");
      } else if (!FABPERF_HAVE_RDMA) {
        throw ShellError("RDMA is not available: fabperf was built without RDMA support");
      } else if (args[0] == "on") {
        // nsdperf's "rdma on": data over RDMA (the verbs engine), control over TCP.
        p_.transport = Transport::rdma;
        say("RDMA on");
      } else {
        throw ShellError(fmt::format("rdma {}: not available (fabperf's RDMA engine supports rdma on|off)", args[0]));
      }
    } else if (cmd == "usecm") {
      usecm_ = on_off(args, cmd);
      if (usecm_ && !FABPERF_HAVE_RDMA)
        throw ShellError("usecm on: RDMA is not available: fabperf was built without RDMA support");
      say(fmt::format("usecm {}{}", usecm_ ? "on" : "off",
                      rdma_on() ? "" : " (used once rdma is on; queue pairs then connect with librdmacm)"));
    } else if (cmd == "sinline") {
      // nsdperf inlines its small RDMA request/reply SENDs. fabperf's are zero-length immediates
      // (nothing to inline) and its data blocks are 4K and up: saying so beats pretending.
      const bool on = on_off(args, cmd);
      say(
          fmt::format("sinline {}: no effect: fabperf's RDMA requests and replies carry no payload, only immediate "
                      "data; data blocks go inline only with `fabperf run --inline BYTES`",
                      on ? "on" : "off"));
    } else if (cmd == "maxrdma") {
      const auto n = number(args, cmd, 1, 64);
      say(
          fmt::format("maxrdma {}: no effect: fabperf uses, for each connection, the RDMA port whose GID matches the "
                      "address it tests (one port per link; `fabperf run --rdma-device` to choose)",
                      n));
    } else if (cmd == "hist") {
      hist_ = on_off(args, cmd);
      say(fmt::format("Histograms {}", hist_ ? "on" : "off"));
    } else if (cmd == "set") {
      set(args);
    } else if (cmd == "verify") {
      p_.verify = on_off(args, cmd);
      say(fmt::format("Data verification {}", *p_.verify ? "on" : "off"));
    } else if (cmd == "plot") {
      plot(args);
    } else if (cmd == "check") {
      check();
    } else if (cmd == "status") {
      status();
    } else if (cmd == "version") {
      say(fmt::format("fabperf {} (nsdperf-compatible shell)", FABPERF_VERSION));
    } else if (cmd == "debug") {
      const auto lvl = args.empty() ? 3 : number(args, cmd, 0, 3);
      static constexpr spdlog::level::level_enum kLevels[] = {spdlog::level::off, spdlog::level::warn,
                                                              spdlog::level::info, spdlog::level::debug};
      spdlog::set_level(kLevels[lvl]);
      say(fmt::format("Debug level set to {}", lvl));
    } else if (cmd == "source") {
      if (args.size() != 1) throw ShellError("Usage: source FILE");
      source(args[0]);
    } else if (cmd == "kill" || cmd == "killall") {
      kill(cmd, args);
    } else if (cmd == "quit" || cmd == "exit") {
      quit_ = true;
    } else if (cmd == "help") {
      for (const auto& c : kCommands) say(fmt::format("  {}", c.help ? c.help : setting_help(c.name)));
      say("Commands may be abbreviated to any unambiguous prefix; ';' separates commands, '#' starts a comment.");
    } else if (cmd == "test") {
      test(args);
    }
  }

  // nsdperf's kill (the named nodes) and killall (every node): each agent is told to exit over
  // its authenticated control connection (SHUTDOWN) and leaves the node lists once it agreed.
  void kill(const std::string& cmd, const std::vector<std::string>& args) {
    AgentQuery q;
    q.coordinator_name = "fabperf shell";
    q.key = key_;
    if (cmd == "kill") {
      if (args.empty()) throw ShellError("Usage: kill HOST...");
      for (const auto& a : args) q.agents.push_back(host(a));
    } else {
      if (!args.empty()) throw ShellError("Usage: killall");
      q.agents = servers_;
      q.agents.insert(q.agents.end(), clients_.begin(), clients_.end());
      if (q.agents.empty()) throw ShellError("killall: no nodes defined (use server/client)");
    }
    std::string failures;
    for (const auto& r : shutdown_agents(q, "nsdperf " + cmd)) {
      if (!r.error.empty()) {
        failures += (failures.empty() ? "" : "\n") + r.error;
        continue;
      }
      forget(host(r.agent));
      say(fmt::format("Killed {}", r.agent));
    }
    if (!failures.empty()) throw ShellError(failures);
  }

  void source(const std::string& path) {
    if (depth_ >= 16) throw ShellError("source: nested more than 16 deep");
    if (const int n = run_file(path, 1)) throw ShellError(fmt::format("{}:{}: stopped at this line", path, n));
  }

  // Every test setting of the table (include/fabperf/core/settings.hpp), by its `fabperf run` name.
  void set(const std::vector<std::string>& args) {
    if (args.empty()) {
      for (const auto& st : spec_settings()) {
        say(fmt::format("  {:<14} {}{}", st.name, st.help,
                        *st.nsdperf ? fmt::format(" (nsdperf: {})", st.nsdperf) : ""));
      }
      return;
    }
    const Setting* st = find_setting(args[0]);
    if (st == nullptr) throw ShellError(fmt::format("set {}: not a test setting ('set' lists them)", args[0]));
    if (std::string_view(st->name) == "test")
      throw ShellError("set test: the test command chooses the test (test write, test read, ...)");
    if (args.size() != 2) {
      throw ShellError(fmt::format("Usage: set {} {}", st->name, st->kind == SettingKind::flag ? "on|off" : st->value));
    }
    SpecParams p = p_;
    checked([&] {
      st->apply(p, args[1], st->name);
      refuse_inapplicable(p);
      (void)TestSpec::make(p);  // the ranges and combinations, now rather than at the next test
    });
    if (std::string_view(st->name) == "rdma-cm") {
      usecm_ = p.rdma_cm.value_or(false);  // the shell's usecm state decides at each test
      p.rdma_cm.reset();
    }
    p_ = p;
    say(fmt::format("{} set to {}", st->name, args[1]));
  }

  void status() {
    auto list = [](const std::vector<HostPort>& v) {
      std::string s;
      for (const auto& h : v) s += " " + h.str();
      return s.empty() ? std::string(" (none)") : s;
    };
    const TestSpec s = TestSpec::make(p_);
    say(fmt::format("servers:{}", list(servers_)));
    say(fmt::format("clients:{}", list(clients_)));
    say(fmt::format("ttime {} buffsize {} socksize {} threads {} parallel {} rdma {} usecm {} hist {} verify {}",
                    s.time().count() / 1'000'000'000, s.buffsize(), s.socksize(), s.threads(), s.parallel(),
                    s.transport() == Transport::rdma ? "on" : "off", usecm_ ? "on" : "off", hist_ ? "on" : "off",
                    s.verify() ? "on" : "off"));
    // What 'set' changed, as the agents will get it.
    const auto j = to_json(s);
    std::string set_text;
    for (const auto& st : spec_settings()) {
      if (st.given(p_) && j.contains(st.key)) set_text += fmt::format(" {}={}", st.name, j.at(st.key).dump());
    }
    if (!set_text.empty()) say("set:" + set_text);
  }

  // A test of the current nodes; p: the settings (p_ with the test kind, or check's probe).
  RunRequest request(const SpecParams& p) {
    if (servers_.empty() || clients_.empty())
      throw ShellError("Need at least one server and one client (commands server, client)");
    RunRequest req;
    req.spec = checked([&] { return TestSpec::make(p); });
    req.servers = servers_;
    req.clients = clients_;
    req.coordinator_name = "fabperf shell";
    req.key = key_;
    return req;
  }

  void check() {
    if (servers_.empty() && clients_.empty()) throw ShellError("No nodes (commands server, client)");
    // A one-second probe test between the current nodes proves reachability and data paths.
    SpecParams p = p_;
    p.time = std::chrono::seconds(1);
    p.test = TestKind::write;
    p.mode = Mode::rpc;
    const Report r = compute_report(run_test(request(p)));
    for (const auto& n : r.nodes) {
      say(fmt::format("{} ({}): {}, clock offset {:.0f} +- {:.0f} us", n.name, n.hostname, to_string(n.status),
                      n.clock_offset_us, n.clock_uncertainty_us));
    }
    say(r.complete ? "All nodes ok" : "Some nodes failed the check");
  }

  void plot(const std::vector<std::string>& args) {
    if (args.size() != 1) throw ShellError("Usage: plot FILE");
    if (!last_) throw ShellError("No test has run yet");
    std::ofstream f(args[0]);
    if (!f) throw ShellError(fmt::format("Cannot write {}", args[0]));
    f << "# fabperf " << to_string(last_->spec.test())
      << ": seconds since the window opened, then tx+rx MB/s per node\n";
    f << "# t_s";
    for (const auto& n : last_->nodes) f << " " << n.name;
    f << "\n";
    std::size_t rows = 0;
    for (const auto& n : last_->nodes) rows = std::max(rows, n.intervals.size());
    for (std::size_t i = 0; i < rows; ++i) {
      double t = 0;
      std::string line;
      for (const auto& n : last_->nodes) {
        if (i < n.intervals.size()) {
          t = n.intervals[i].t_s;
          line += fmt::format(" {:.1f}", n.intervals[i].tx_mb_per_s + n.intervals[i].rx_mb_per_s);
        } else {
          line += " -";
        }
      }
      f << fmt::format("{:.3f}", t) << line << "\n";
    }
    say(fmt::format("Plot data written to {}", args[0]));
  }

  // nsdperf's per-client histogram block: average/median/std deviation in msec, then 1-ms rows;
  // with `fine`, then every log bucket by its lower bound.
  void histogram_block(const std::string& host, const std::string& title, const LatencyHistogram& h, bool fine) {
    say(fmt::format("{} {} (average {:.3f} msec, median {:.3f} msec, std deviation {:.3f} msec)", host, title,
                    h.mean_ns() / 1e6, h.percentile_ns(50) / 1e6, h.stddev_ns() / 1e6));
    say("     msec  nevents");
    std::map<std::uint64_t, std::uint64_t> rows;
    std::string fine_rows;
    for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
      const auto c = h.bucket_count(i);
      if (c == 0) continue;
      // Each log bucket lands in the 1-ms row of its geometric middle, clamped to the exact range.
      double mid = std::sqrt(LatencyHistogram::bucket_lower_ns(i) * LatencyHistogram::bucket_upper_ns(i));
      mid = std::clamp(mid, static_cast<double>(h.min_ns()), static_cast<double>(h.max_ns()));
      rows[static_cast<std::uint64_t>(mid / 1e6)] += c;
      fine_rows += fmt::format("{:12.1f} {:8}\n", LatencyHistogram::bucket_lower_ns(i) / 1e3, c);
    }
    for (const auto& [ms, c] : rows) say(fmt::format("{:9} {:8}", ms, c));
    if (fine) out_ << fmt::format("{} {}, fine buckets (usec lower bound, nevents)\n{}", host, title, fine_rows);
  }

  void test(const std::vector<std::string>& args) {
    std::vector<TestKind> kinds;
    if (args.empty()) {
      kinds = {TestKind::nwrite, TestKind::read};
    } else {
      for (const auto& a : args) {
        try {
          kinds.push_back(parse_test_kind(a));
        } catch (const UsageError&) {
          throw ShellError(fmt::format("Unknown test '{}' (write, read, nwrite, swrite, sread, rw)", a));
        }
      }
    }
    for (const auto k : kinds) {
      SpecParams p = p_;
      p.test = k;
      p.mode = p_.mode.value_or(Mode::rpc);  // nsdperf's blocks unless 'set mode stream'
      if (rdma_on()) p.rdma_cm = usecm_;
      const Report r = compute_report(run_test(request(p)));
      last_ = r;
      say(render_summary_line(r));
      // Every client's network delay times, then (hist on) every client's block transmit times.
      for (const bool transmit : {false, true}) {
        for (const auto& n : r.nodes) {
          const auto& h = transmit ? n.histogram : n.delay_histogram;
          if (h && h->count() > 0 && (hist_ || !transmit))
            histogram_block(host_of(n.name), transmit ? "block transmit times" : "network delay times", *h, transmit);
        }
      }
      for (const auto& f : r.findings) say("  ! " + f);
      if (!r.complete) {
        last_code_ = static_cast<int>(ExitCode::infrastructure);
        throw ShellError(fmt::format("Test {} incomplete: a node was lost", to_string(k)));
      }
    }
  }

  static std::string host_of(const std::string& name) { return parse_host_port(name, "node").host; }

  std::ostream& out_;
  std::ostream& err_;
  auth::Key key_{};
  std::vector<HostPort> servers_;
  std::vector<HostPort> clients_;
  SpecParams p_;
  bool hist_{false};
  bool usecm_{false};  // nsdperf's usecm: applies to tests while rdma is on
  [[nodiscard]] bool rdma_on() const { return p_.transport == Transport::rdma; }
  bool quit_{false};
  int depth_{0};
  int last_code_{0};
  std::optional<Report> last_;
};

namespace {

// The prompt's lines: with line editing and a history file ($FABPERF_HISTORY, else
// ~/.fabperf_history) through libedit on a terminal; plain std::getline otherwise (pipes, files,
// builds without libedit).
class LineReader {
 public:
  explicit LineReader(bool tty) : tty_(tty) {
#if FABPERF_HAVE_LIBEDIT
    if (!tty_) return;
    using_history();
    stifle_history(1000);
    if (const char* p = std::getenv("FABPERF_HISTORY"); p != nullptr && *p != '\0') {
      history_ = p;
    } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
      history_ = std::string(h) + "/.fabperf_history";
    }
    if (!history_.empty()) (void)read_history(history_.c_str());  // a missing file is a first session
#endif
  }

  // Shows the prompt (terminals only) and reads one line; false at end of input.
  bool read(const char* prompt, std::string& line) {
#if FABPERF_HAVE_LIBEDIT
    if (char* raw = tty_ ? readline(prompt) : nullptr) {
      line = raw;
      std::free(raw);
      // Blank lines and immediate repeats would only clutter the recall list. Saved at every line:
      // a shell ended by a signal keeps its history.
      if (line.find_first_not_of(" \t") != std::string::npos && line != last_) {
        add_history(line.c_str());
        last_ = line;
        if (!history_.empty()) (void)write_history(history_.c_str());
      }
      return true;
    } else if (tty_) {  // end of input
      std::cout << "\n";
      return false;
    }
#endif
    if (tty_) std::cout << prompt << std::flush;
    return static_cast<bool>(std::getline(std::cin, line));
  }

 private:
#if FABPERF_HAVE_LIBEDIT
  std::string history_;
  std::string last_;
#endif
  bool tty_;
};

}  // namespace

int run_shell(const ShellOptions& o) {
  ShellSession s(std::cout, std::cerr, o.key_file);  // a bad key file throws a UsageError: exit 2
  if (!o.commands.empty() && !s.line(fmt::format("{}", fmt::join(o.commands, " ")))) return s.fail_code();
  try {
    for (const auto& f : o.input_files) {
      if (!s.quit() && s.run_file(f, 0) != 0) return s.fail_code();
    }
  } catch (const ShellError& e) {  // a file that cannot be opened
    std::cerr << e.what() << "\n";
    return static_cast<int>(ExitCode::usage);
  }
  if (!o.commands.empty() || !o.input_files.empty()) return 0;
  // On a terminal: line editing and history (libedit) when built with it; otherwise plain reads.
  LineReader reader(::isatty(0) != 0);
  std::string l;
  while (!s.quit()) {
    if (!reader.read("nsdperf> ", l)) break;
    s.line(l);  // interactive: report and continue
  }
  return 0;
}

}  // namespace fabperf
