#include <fabperf/core/bytes.hpp>
#include <fabperf/core/child.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/stop.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/launch/launch.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

namespace fabperf::launch {
namespace {

// Its open stdout and stderr, to poll.
void watch(const Child& c, std::vector<pollfd>& fds) {
  if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
  if (c.err >= 0) fds.push_back({c.err, POLLIN, 0});
}

// A launcher process (ssh or srun) and what it wrote.
struct Launched : Child {
  using Child::Child;
  std::string out_buf;
  std::string err_text;  // what it wrote to stderr while not forwarded: set-up, stop (bounded)
  std::string err_line;  // partial line after set-up (forwarded line by line)

  // Waits up to ms for output, then reads what stderr and stdout have into err_text and out_buf
  // (up to out_cap; the rest is dropped); each is closed at its end.
  void pump(int ms, std::size_t out_cap) {
    if (ms > 0) {
      std::vector<pollfd> fds;
      watch(*this, fds);
      ::poll(fds.data(), fds.size(), ms);
    }
    if (err >= 0 && !read_some(err, err_text, 1 << 16)) close_err();
    if (out >= 0 && !read_some(out, out_buf, out_cap)) close_out();
  }
};

// Takes the first whole line out of buf, without its '\n'; false while none is complete.
bool take_line(std::string& buf, std::string& line) {
  const auto nl = buf.find('\n');
  if (nl == std::string::npos) return false;
  line = buf.substr(0, nl);
  buf.erase(0, nl + 1);
  return true;
}

// An agent's flags after its --listen when ssh or srun starts it (the key comes on stdin).
constexpr const char* kLaunchedAgentFlags = "--ready-fd 1 --key-stdin --exit-on-stdin-eof --log-level warn";

auth::Key one_time_key() {
  const auto n = auth::make_nonce();  // 32 random bytes from OpenSSL
  return auth::Key(std::vector<std::uint8_t>(n.begin(), n.end()));
}

// The started launchers; destroying the set ends them all. A thread forwards their stderr (agent
// warnings) while the test runs, so a chatty agent never blocks on a full pipe.
class LaunchedAgents final : public Agents {
 public:
  LaunchedAgents() : key_(one_time_key()) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw SystemError("pipe", "launcher wake-up", errno);
  }
  // Every launcher's stdin closed, up to 5 s for them to exit, then terminated and killed.
  ~LaunchedAgents() override {
    stop_forwarding();
    std::lock_guard lock(mu_);
    std::vector<Child*> all;
    for (auto& c : children_) all.push_back(&c);
    const auto drain = [&] {
      for (auto& c : children_) c.pump(0, 0);
    };
    stop_all(all, std::chrono::milliseconds(5000), drain, [&](const Child& c) {
      spdlog::warn("launch: {} (pid {}) did not stop within 5.0 s; terminating it", c.label, c.pid);
    });
    children_.clear();
    ::close(wake_[0]);  // both open: the constructor throws when pipe2 fails
    ::close(wake_[1]);
  }

  const std::vector<HostPort>& endpoints() const override { return endpoints_; }
  const auth::Key& key() const override { return key_; }

  // Set-up phase (single-threaded, before forwarding starts).
  std::vector<Launched>& children() { return children_; }
  // Starts a launcher and (with_key) writes the key line to its stdin.
  Launched& spawn(std::string label, const std::vector<std::string>& argv, bool with_key = true,
                  Child::Stderr err = Child::Stderr::pipe) {
    Launched& c = children_.emplace_back(std::move(label), argv, err);
    if (!with_key) return c;
    std::string line = to_hex(key_.bytes()) + "\n";
    // The pipe is empty and far larger than a key line: this write is complete or failed.
    const ssize_t n = ::write(c.in, line.data(), line.size());
    std::fill(line.begin(), line.end(), '\0');
    if (n != static_cast<ssize_t>(line.size())) c.close_in();  // exited already (EPIPE): its stderr says why
    return c;
  }
  std::vector<HostPort>& mutable_endpoints() { return endpoints_; }

  // Set-up done: says so, and forwards their stderr from now on.
  void start_forwarding(std::size_t n, const char* how, std::int64_t t0) {
    spdlog::info("launch: {} agents started {} in {:.2f} s", n, how, static_cast<double>(mono_now_ns() - t0) / 1e9);
    forwarder_ = std::thread([this] { forward_loop(); });
  }

 private:
  void stop_forwarding() noexcept {
    if (!forwarder_.joinable()) return;
    const char x = 1;
    (void)!::write(wake_[1], &x, 1);
    forwarder_.join();
  }

  void forward_loop() {
    for (;;) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
      {
        std::lock_guard lock(mu_);
        for (const auto& c : children_) watch(c, fds);
      }
      if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
      if (fds[0].revents) return;
      // Every pipe is non-blocking: each is read for what it has, if anything.
      std::lock_guard lock(mu_);
      for (auto& c : children_) {
        if (c.out >= 0 && !read_some(c.out, c.out_buf, 0)) c.close_out();  // nothing kept (cap 0)
        if (c.err < 0) continue;
        const bool open = read_some(c.err, c.err_line, 1 << 16);
        for (std::string line; take_line(c.err_line, line);) {
          if (!line.empty() && line.back() == '\r') line.pop_back();
          if (!line.empty()) spdlog::warn("agent on {}: {}", c.label, line);
        }
        if (!open) {
          c.close_err();
          if (c.reap(200)) spdlog::warn("launch: {} {} while the agent was in use", c.label, c.describe_status());
        }
      }
    }
  }

  auth::Key key_;
  std::vector<HostPort> endpoints_;
  mutable std::mutex mu_;
  std::vector<Launched> children_;
  std::thread forwarder_;
  int wake_[2]{-1, -1};
};

// The lines of a text that are not blank, trailing blanks and carriage returns removed.
std::vector<std::string> text_lines(std::string_view text) {
  std::vector<std::string> lines;
  for (std::string& line : split_list(text, '\n')) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

std::string fmt_seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:.0f} s", static_cast<double>(ms.count()) / 1e3);
}

std::string run_capture(const std::vector<std::string>& argv, const std::string& what) {
  Launched c(argv.front(), argv);
  c.close_in();
  const std::int64_t deadline = mono_now_ns() + 30'000'000'000;
  while (c.out >= 0 || c.err >= 0) {
    if (mono_now_ns() > deadline) {
      c.signal(SIGKILL);
      break;
    }
    c.pump(200, std::size_t{1} << 20);
  }
  c.stop(std::chrono::milliseconds(5000));
  if (c.exit_code() != 0) {
    throw Error(ExitCode::infrastructure,
                fmt::format("{}: '{}' {}: {}", what, argv.front(), c.describe_status(), stderr_summary(c.err_text)));
  }
  return c.out_buf;
}

// stdout closed without a ready line: ssh or the agent failed. Waits for its status and the rest
// of its error text, and says which failed.
std::string closed_without_ready(Launched& c) {
  const std::int64_t until = mono_now_ns() + 2'000'000'000;
  while (c.err >= 0 && mono_now_ns() < until) c.pump(100, 0);  // stdout is closed already
  c.close_in();
  c.reap(2000);
  const std::string who = c.exited && c.exit_code() == 255 ? "ssh" : "the agent";
  return fmt::format("{} {}: {}", who, c.exited ? c.describe_status() : "closed its output",
                     stderr_summary(c.err_text));
}

}  // namespace

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\'";  // close, then this quote escaped, then reopen: '\''
    out.push_back(c);
  }
  return out + "'";
}

std::string ssh_remote_command(const SshOptions& o) {
  // POSIX sh (the remote login shell runs it). SSH_CONNECTION = "client port server port".
  const std::string listen = o.agent_listen.empty() ? fmt::format("\"[${{3:-::}}]:{}\"", o.agent_port)
                                                    : shell_quote(fmt::format("[{}]:{}", o.agent_listen, o.agent_port));
  return fmt::format("set -- $SSH_CONNECTION; exec {} agent --listen {} {}", shell_quote(o.agent_path), listen,
                     kLaunchedAgentFlags);
}

std::vector<std::string> ssh_argv(const SshOptions& o, const std::string& host) {
  std::vector<std::string> argv = o.ssh_command;
  const auto secs = std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count());
  argv.insert(argv.end(),
              {"-T", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", fmt::format("ConnectTimeout={}", secs)});
  argv.insert(argv.end(), o.extra.begin(), o.extra.end());
  argv.insert(argv.end(), {"--", host, ssh_remote_command(o)});
  return argv;
}

std::string stderr_summary(std::string_view text) {
  const std::vector<std::string> lines = text_lines(text);
  if (lines.empty()) return "(no error output)";
  std::string out =
      fmt::format("{}", fmt::join(lines.end() - std::min<std::ptrdiff_t>(3, std::ssize(lines)), lines.end(), " / "));
  if (out.size() > 400) out = out.substr(0, 397) + "...";
  return out;
}

std::uint16_t ready_port(std::string_view line) {
  constexpr std::string_view kPrefix = "LISTENING ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return 0;
  const auto colon = line.rfind(':');
  if (colon == std::string_view::npos) return 0;
  std::uint16_t port = 0;  // from_chars refuses a sign, a number past 65535 and an empty text
  const auto [end, ec] = std::from_chars(line.data() + colon + 1, line.data() + line.size(), port);
  return ec == std::errc{} && end == line.data() + line.size() ? port : 0;
}

std::map<std::string, std::string> parse_node_addrs(std::string_view text) {
  std::map<std::string, std::string> out;
  for (const std::string& row : split_list(text, '\n')) {  // `scontrol -o`: one node per line
    std::istringstream in(row);
    std::string name;
    for (std::string tok; in >> tok;) {
      if (tok.rfind("NodeName=", 0) == 0) {
        name = tok.substr(9);
      } else if (tok.rfind("NodeAddr=", 0) == 0 && !name.empty()) {
        out[name] = tok.substr(9);
      }
    }
  }
  return out;
}

LabelledLine parse_labelled(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const std::size_t d = i;
  int task = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - d < 9) task = task * 10 + (line[i++] - '0');
  if (i == d || line.substr(i, 2) != ": ") return {-1, std::string(line)};
  return {task, std::string(line.substr(i + 2))};
}

std::unique_ptr<Agents> start_ssh(const std::vector<HostPort>& hosts, const SshOptions& o) {
  if (hosts.empty()) throw UsageError("--launch ssh: no hosts");
  if (o.fanout < 1) throw UsageError("--launch-fanout: must be at least 1");
  raise_fd_limit();
  auto agents = std::make_unique<LaunchedAgents>();
  auto& children = agents->children();
  children.reserve(hosts.size());
  auto& eps = agents->mutable_endpoints();
  eps.resize(hosts.size());
  std::vector<std::string> errors(hosts.size());
  std::vector<bool> done(hosts.size(), false);
  std::vector<std::int64_t> deadline(hosts.size(), 0);
  std::size_t next = 0, finished = 0;  // hosts started (children[h] is host h's) and done
  const std::int64_t t0 = mono_now_ns();

  auto fail = [&](std::size_t h, std::string why) {
    children[h].stop(std::chrono::milliseconds(2000));
    errors[h] = fmt::format("{}: {}", hosts[h].host, why);
    done[h] = true;
    ++finished;
  };

  while (finished < hosts.size()) {
    if (stop::stopped()) {
      // Sessions still connecting have no agent to stop gracefully: end them now, so Ctrl-C is
      // prompt (the ones with a ready agent stop through their stdin, in the destructor).
      for (std::size_t h = 0; h < next; ++h) {
        if (!done[h]) children[h].signal(SIGTERM);
      }
      throw Error(ExitCode::infrastructure, "interrupted while starting agents over ssh; stopped them all");
    }
    while (next - finished < o.fanout && next < hosts.size()) {
      const std::size_t h = next++;
      agents->spawn(hosts[h].host, ssh_argv(o, hosts[h].host));
      deadline[h] = mono_now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(o.timeout).count();
    }
    std::vector<pollfd> fds;
    std::int64_t wake = mono_now_ns() + 100'000'000;  // re-check the interrupt flag
    for (std::size_t h = 0; h < next; ++h) {
      if (done[h]) continue;
      watch(children[h], fds);
      wake = std::min(wake, deadline[h]);
    }
    const auto ms = std::max<std::int64_t>(0, (wake - mono_now_ns()) / 1'000'000);
    if (::poll(fds.data(), fds.size(), static_cast<int>(ms)) < 0 && errno != EINTR) {
      throw SystemError("poll", "ssh launchers", errno);
    }
    for (std::size_t h = 0; h < next; ++h) {
      if (done[h]) continue;
      Launched& c = children[h];
      c.pump(0, 4096);
      // A login script may print before the agent does: lines before the ready line are skipped.
      std::uint16_t port = 0;
      for (std::string line; port == 0 && take_line(c.out_buf, line);) port = ready_port(line);
      if (port != 0) {
        eps[h] = hosts[h];
        eps[h].port = port;
        done[h] = true;
        ++finished;
        spdlog::info("launch: agent on {} ready on port {} ({:.2f} s)", hosts[h].host, port,
                     static_cast<double>(mono_now_ns() - t0) / 1e9);
        continue;
      }
      if (c.out < 0) {
        fail(h, closed_without_ready(c));
        continue;
      }
      if (mono_now_ns() >= deadline[h]) {
        fail(h, fmt::format("no agent ready within {}: {}", fmt_seconds(o.timeout), stderr_summary(c.err_text)));
      }
    }
  }
  std::erase(errors, std::string());
  if (!errors.empty()) {
    throw Error(ExitCode::infrastructure, fmt::format("could not start agents over ssh on {} of {} hosts:\n{}",
                                                      errors.size(), hosts.size(), fmt::join(errors, "\n")));
  }
  agents->start_forwarding(hosts.size(), "over ssh", t0);
  return agents;
}

std::unique_ptr<Agents> start_local(int count, const std::string& key_file) {
  std::vector<std::string> argv = {self_exe(), "agent",       "--listen", "127.0.0.1:0",        "--ready-fd",
                                   "1",        "--log-level", "warn",     "--exit-on-stdin-eof"};
  if (key_file.empty()) {
    argv.emplace_back("--key-stdin");
  } else {
    argv.insert(argv.end(), {"--key-file", key_file});
  }
  auto agents = std::make_unique<LaunchedAgents>();
  agents->children().reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Their warnings go straight to our stderr.
    Launched& c = agents->spawn("local agent", argv, key_file.empty(), Child::Stderr::inherited);
    const std::int64_t deadline = mono_now_ns() + 10'000'000'000;
    std::string line;
    while (!take_line(c.out_buf, line) && c.out >= 0 && mono_now_ns() < deadline) c.pump(100, 4096);
    const std::uint16_t port = ready_port(line);
    if (port == 0) {
      throw SystemError("start local agent", fmt::format("pid {}", c.pid),
                        "it did not report a listening port within 10 s");
    }
    agents->mutable_endpoints().push_back(HostPort{"127.0.0.1", port, {}});
  }
  return agents;
}

std::vector<std::string> slurm_allocation_nodes() {
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (list == nullptr || *list == '\0') {
    throw UsageError(
        "--launch slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is not set): run it from an "
        "sbatch script or salloc");
  }
  const std::string out = run_capture({"scontrol", "show", "hostnames", list}, "list the allocation's nodes");
  std::vector<std::string> nodes = text_lines(out);
  if (nodes.empty()) throw Error(ExitCode::infrastructure, fmt::format("scontrol show hostnames '{}': no nodes", list));
  return nodes;
}

std::unique_ptr<Agents> start_slurm(const std::vector<std::string>& wanted, const SlurmOptions& o) {
  const auto allocation = slurm_allocation_nodes();
  const std::vector<std::string> nodes = wanted.empty() ? allocation : wanted;
  for (const auto& n : nodes) {
    if (std::find(allocation.begin(), allocation.end(), n) == allocation.end()) {
      throw UsageError(fmt::format("--launch slurm: node '{}' is not in this allocation ({})", n,
                                   std::getenv("SLURM_JOB_NODELIST")));
    }
  }
  const std::string nodelist = fmt::format("{}", fmt::join(nodes, ","));
  const auto addrs =
      parse_node_addrs(run_capture({"scontrol", "-o", "show", "node", nodelist}, "read the nodes' addresses"));
  for (const auto& n : nodes) {
    if (!addrs.count(n)) throw Error(ExitCode::infrastructure, fmt::format("scontrol show node {}: no NodeAddr", n));
  }
  const std::string agent = o.agent_path.empty() ? self_exe() : o.agent_path;
  // The node's name first (task order is Slurm's business), then the agent's ready line.
  const std::string script = fmt::format("echo \"NODE $SLURMD_NODENAME\"; exec \"$0\" agent --listen '[::]:{}' {}",
                                         o.agent_port, kLaunchedAgentFlags);
  std::vector<std::string> argv = split_list(
      fmt::format("srun --overlap --nodes={0} --ntasks={0} --ntasks-per-node=1 --nodelist={1} --input=all --label "
                  "--kill-on-bad-exit=0 --job-name=fabperf-agents sh -c",
                  nodes.size(), nodelist),
      ' ');
  argv.insert(argv.end(), {script, agent});

  auto agents = std::make_unique<LaunchedAgents>();
  Launched& c = agents->spawn("srun", argv);
  std::map<std::string, int> task_of;  // node name -> srun task
  std::map<int, std::uint16_t> port_of;
  const std::int64_t t0 = mono_now_ns();
  const std::int64_t deadline = t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(o.timeout).count();
  while (port_of.size() < nodes.size()) {
    if (stop::stopped()) {
      c.signal(SIGTERM);  // srun ends its step on SIGTERM
      throw Error(ExitCode::infrastructure, "interrupted while starting agents with srun; stopped them");
    }
    if (mono_now_ns() >= deadline) {
      throw Error(ExitCode::infrastructure,
                  fmt::format("srun: {} of {} agents ready after {} ({})", port_of.size(), nodes.size(),
                              fmt_seconds(o.timeout), stderr_summary(c.err_text)));
    }
    c.pump(100, std::size_t{1} << 20);
    for (std::string line; take_line(c.out_buf, line);) {
      const auto l = parse_labelled(line);
      if (l.task < 0) continue;
      if (l.text.rfind("NODE ", 0) == 0) {
        task_of[l.text.substr(5)] = l.task;
      } else if (const auto p = ready_port(l.text); p != 0) {
        port_of[l.task] = p;
      }
    }
    if (c.out < 0 && port_of.size() < nodes.size()) {
      c.reap(2000);
      throw Error(ExitCode::infrastructure, fmt::format("srun {} with {} of {} agents ready: {}",
                                                        c.exited ? c.describe_status() : "closed its output",
                                                        port_of.size(), nodes.size(), stderr_summary(c.err_text)));
    }
  }
  c.err_text.clear();
  auto& eps = agents->mutable_endpoints();
  for (const auto& n : nodes) {
    const auto task = task_of.find(n);
    if (task == task_of.end() || !port_of.count(task->second)) {
      throw Error(ExitCode::infrastructure, fmt::format("srun: no agent reported from node {}", n));
    }
    eps.push_back(HostPort{addrs.at(n), port_of.at(task->second), {}});
  }
  agents->start_forwarding(nodes.size(), "with srun", t0);
  return agents;
}

}  // namespace fabperf::launch
