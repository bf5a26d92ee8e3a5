// fabperf: one binary, subcommands over the core library. Parsing and validation only; the work
// happens in the library. Exit codes: docs/usage.md.
#include <fabperf/agent.hpp>
#include <fabperf/auth.hpp>
#include <fabperf/build_config.hpp>
#include <fabperf/compare.hpp>
#include <fabperf/bonding.hpp>
#include <fabperf/links.hpp>
#include <fabperf/shell.hpp>
#include <fabperf/coordinator.hpp>
#include <fabperf/engine.hpp>
#include <fabperf/error.hpp>
#include <fabperf/report.hpp>
#include <fabperf/spec.hpp>
#include <fabperf/units.hpp>

#include "cli/launch_cli.hpp"

#include <cxxopts.hpp>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace fabperf {
namespace {

constexpr const char* kUsage = R"(usage: fabperf <command> [options]

commands:
  agent     run a node agent (listens on TCP 6668)
  run       run a test against agents (or --local N agents on this host)
  links     list this host's network interfaces: speed, MTU, addresses, bonds, socket limits
  compare   compare two saved results (before/after a change) link by link
  shell     nsdperf's command language: fabperf shell [-i FILE] [COMMAND...]
  keygen    write a new random shared key: 'fabperf keygen FILE [--force]' (mode 0600)
  version   print the version
  help      this text; 'fabperf <command> --help' for a command's options

security: agents and coordinators given the same --key-file (or FABPERF_KEY_FILE) prove it to
          each other before anything else; without a key an agent serves loopback only
          (docs/security.md)

exit codes: 0 ok, 1 a KPI failed, 2 usage error (nothing started),
            3 infrastructure failure (agent unreachable, lost mid-test; partial results are still written)
)";

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("fabperf");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw UsageError(fmt::format("--log-level '{}': unknown level (trace, debug, info, warn, error, off)", level));
  }
  spdlog::set_level(lvl);
}

cxxopts::ParseResult parse(cxxopts::Options& opts, int argc, char** argv) {
  try {
    auto r = opts.parse(argc, argv);
    if (!r.unmatched().empty()) throw UsageError(fmt::format("unexpected argument '{}'", r.unmatched().front()));
    return r;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

// --key-file, else FABPERF_KEY_FILE; empty path: no key.
std::string key_file_option(const cxxopts::ParseResult& r);

template <typename T>
T get(const cxxopts::ParseResult& r, const std::string& name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(fmt::format("--{}: {}", name, e.what()));
  }
}

std::string key_file_option(const cxxopts::ParseResult& r) {
  if (r.count("key-file")) {
    const auto path = get<std::string>(r, "key-file");
    if (path.empty()) throw UsageError("--key-file: empty path");
    return path;
  }
  return auth::key_file_from_env();
}

int cmd_keygen(int argc, char** argv) {
  cxxopts::Options o("fabperf keygen", "Write a new random shared key for agents and coordinators (mode 0600).");
  o.positional_help("FILE");
  o.add_options()
    ("file", "key file to create", cxxopts::value<std::string>())
    ("force", "replace an existing file")
    ("h,help", "this help");
  o.parse_positional({"file"});
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help();
    return 0;
  }
  if (!r.count("file")) throw UsageError("keygen: give the key file to create: fabperf keygen FILE");
  const auto path = get<std::string>(r, "file");
  if (path.empty()) throw UsageError("keygen: empty file name");
  auth::write_key_file(path, r.count("force") > 0);
  std::cout << "wrote a new key to " << path << " (mode 0600); copy it to every agent host, keep it private\n";
  return 0;
}

// One line from stdin, read byte by byte so nothing after it is consumed (the agent then watches
// stdin for end of file). Bounded: a launcher that sends nothing within 30 s is not coming.
auth::Key read_key_from_stdin() {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{0, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      throw UsageError("--key-stdin: no key line on stdin within 30 s");
    }
    char c = 0;
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw UsageError("--key-stdin: stdin ended before a key line");
    if (c == '\n') break;
    if (line.size() > 4 * auth::kMaxKeyBytes) throw UsageError("--key-stdin: the first line of stdin is too long for a key");
    line.push_back(c);
  }
  auth::Key key = auth::parse_key(line, "stdin");
  std::fill(line.begin(), line.end(), '\0');
  return key;
}

int cmd_agent(int argc, char** argv) {
  cxxopts::Options o("fabperf agent", "Run a fabperf node agent.");
  o.add_options()
    ("listen", "address and port to listen on ([::]:6668 = all addresses)", cxxopts::value<std::string>()->default_value("[::]:6668"))
    ("ready-fd", "write 'LISTENING host:port' to this file descriptor once listening", cxxopts::value<int>()->default_value("-1"))
    ("max-duration", "longest test this agent accepts", cxxopts::value<std::string>()->default_value("3600"))
    ("max-buffer-memory", "most buffer memory a test may make this agent allocate", cxxopts::value<std::string>()->default_value("1G"))
    ("key-file", "shared key (from 'fabperf keygen'); coordinators must prove it. Default: $FABPERF_KEY_FILE",
     cxxopts::value<std::string>())
    ("insecure", "without a key, still listen on non-loopback addresses and obey any coordinator")
    ("key-stdin", "read the shared key (hex) from the first line of stdin, as 'run --launch' passes it")
    ("exit-on-stdin-eof", "stop when stdin reaches end of file (the launcher holds it open)")
    ("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("info"))
    ("h,help", "this help");
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help();
    return 0;
  }
  setup_logging(get<std::string>(r, "log-level"));
  AgentOptions a;
  const auto hp = parse_host_port(get<std::string>(r, "listen"), "--listen");
  a.listen_host = hp.host;
  a.listen_port = hp.port;
  a.ready_fd = get<int>(r, "ready-fd");
  const auto md = parse_duration(get<std::string>(r, "max-duration"), "--max-duration");
  if (md < std::chrono::seconds(1)) throw UsageError("--max-duration: must be at least 1 s");
  a.max_duration = std::chrono::duration_cast<std::chrono::seconds>(md);
  a.max_buffer_memory = parse_size(get<std::string>(r, "max-buffer-memory"), "--max-buffer-memory");
  if (a.max_buffer_memory < (16u << 20)) throw UsageError("--max-buffer-memory: must be at least 16M");
  a.insecure = r.count("insecure") > 0;
  a.exit_on_stdin_eof = r.count("exit-on-stdin-eof") > 0;
  if (r.count("key-stdin")) {
    if (a.insecure) throw UsageError("--insecure: cannot be combined with --key-stdin");
    if (r.count("key-file")) throw UsageError("--key-stdin: cannot be combined with --key-file");
    a.key = read_key_from_stdin();
    a.key_source = "stdin";
    return run_agent(a);
  }
  const std::string key_file = key_file_option(r);
  if (!key_file.empty()) {
    if (a.insecure) throw UsageError("--insecure: cannot be combined with a key file (--key-file or FABPERF_KEY_FILE)");
    a.key = auth::load_key_file(key_file);
    a.key_source = key_file;
  }
  return run_agent(a);
}

std::vector<HostPort> host_list(const std::string& text, const char* what) {
  std::vector<HostPort> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError(fmt::format("{} '{}': empty host in the list", what, text));
    HostPort hp = parse_host_port(item, what);
    if (hp.port == 0) throw UsageError(fmt::format("{} '{}': port 0 is not an agent's port", what, item));
    // Resolve now: a typo must fail before anything starts.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &res);
    if (rc != 0) throw UsageError(fmt::format("{} '{}': host does not resolve ({})", what, hp.host, gai_strerror(rc)));
    freeaddrinfo(res);
    for (const auto& x : out) {
      if (x.host == hp.host && x.port == hp.port) throw UsageError(fmt::format("{}: {} is listed twice", what, hp.str()));
    }
    out.push_back(std::move(hp));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int cmd_run(int argc, char** argv) {
  cxxopts::Options o("fabperf run", "Run a throughput test between fabperf agents.");
  o.add_options("hosts")
    ("servers", "server agents: host[:port][@LINKADDR+LINKADDR...],... (port 6668 by default; [v6addr]:port)",
     cxxopts::value<std::string>())
    ("clients", "client agents: host[:port],...", cxxopts::value<std::string>())
    ("local", "start N agents on this host (127.0.0.1) and split them into servers and clients", cxxopts::value<int>());
  o.add_options("test")
    ("test", "write, read, rw, nwrite, swrite or sread", cxxopts::value<std::string>()->default_value("write"))
    ("mode", "rpc (nsdperf-like blocks with a reply) or stream (continuous)", cxxopts::value<std::string>()->default_value("rpc"))
    ("transport", "tcp or rdma", cxxopts::value<std::string>()->default_value("tcp"))
    ("time", "test time in seconds (nsdperf ttime)", cxxopts::value<std::string>()->default_value("10"))
    ("buffsize", "block size, 4K..16M", cxxopts::value<std::string>()->default_value("4M"))
    ("socksize", "socket buffer size, 0 = OS default", cxxopts::value<std::string>()->default_value("0"))
    ("threads", "tester threads per client (rpc mode)", cxxopts::value<std::string>()->default_value("4"))
    ("parallel", "TCP connections per client-server pair", cxxopts::value<std::string>()->default_value("1"))
    ("warmup", "seconds excluded at the start (default 10% of --time)", cxxopts::value<std::string>())
    ("cooldown", "seconds excluded at the end (default 10% of --time)", cxxopts::value<std::string>())
    ("interval", "sampling interval of the time series", cxxopts::value<std::string>()->default_value("1"));
  o.add_options("tuning")
    ("skip-rx-copy", "receivers discard data in the kernel (MSG_TRUNC) instead of copying it")
    ("zerocopy", "stream senders use MSG_ZEROCOPY (completions reaped)")
    ("congestion", "TCP congestion control, e.g. cubic or bbr", cxxopts::value<std::string>())
    ("rate", "pace each connection to this many bytes/s (SO_MAX_PACING_RATE), e.g. 100M", cxxopts::value<std::string>())
    ("busy-poll", "SO_BUSY_POLL microseconds", cxxopts::value<std::string>())
    ("notsent-lowat", "TCP_NOTSENT_LOWAT bytes", cxxopts::value<std::string>())
    ("cpus", "pin data threads round-robin to these CPUs, e.g. 0-3,8 (default: the NIC's NUMA node when known)",
     cxxopts::value<std::string>())
    ("no-affinity", "never pin data threads")
    ("verify", "receivers check every byte against the sent pattern (nsdperf verify on)");
  o.add_options("bonding")
    ("spread-ports", "clients bind source ports chosen so that their flows cover every member of the local bond "
     "evenly under its xmit_hash_policy (802.3ad/balance-xor with layer3+4); the ports used are reported");
  o.add_options("output")
    ("json", "write the full result as JSON to FILE ('-' = stdout, text report suppressed)", cxxopts::value<std::string>())
    ("v,verbose", "add the per-connection table")
    ("q,quiet", "print only the nsdperf-style summary line")
    ("connect-timeout", "seconds to wait for each agent", cxxopts::value<std::string>()->default_value("5"))
    ("key-file", "shared key (from 'fabperf keygen') to prove to the agents. Default: $FABPERF_KEY_FILE",
     cxxopts::value<std::string>())
    ("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("warn"))
    ("h,help", "this help");
  cli::add_launch_options(o);
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help({"hosts", "test", "tuning", "bonding", "output", "launch"});
    return 0;
  }
  setup_logging(get<std::string>(r, "log-level"));

  SpecParams p;
  p.test = parse_test_kind(get<std::string>(r, "test"));
  p.mode = parse_mode(get<std::string>(r, "mode"));
  p.transport = parse_transport(get<std::string>(r, "transport"));
  p.time = parse_duration(get<std::string>(r, "time"), "--time");
  p.buffsize = parse_size(get<std::string>(r, "buffsize"), "--buffsize");
  p.socksize = parse_size(get<std::string>(r, "socksize"), "--socksize");
  p.threads = static_cast<std::uint32_t>(parse_int(get<std::string>(r, "threads"), "--threads", 1, limits::kMaxThreads));
  p.parallel = static_cast<std::uint32_t>(parse_int(get<std::string>(r, "parallel"), "--parallel", 1, limits::kMaxParallel));
  if (r.count("warmup")) p.warmup = parse_duration(get<std::string>(r, "warmup"), "--warmup");
  if (r.count("cooldown")) p.cooldown = parse_duration(get<std::string>(r, "cooldown"), "--cooldown");
  if (r.count("skip-rx-copy")) p.skip_rx_copy = true;
  if (r.count("zerocopy")) p.zerocopy = true;
  if (r.count("no-affinity")) p.no_affinity = true;
  if (r.count("verify")) p.verify = true;
  if (r.count("spread-ports")) p.spread_ports = true;
  if (r.count("congestion")) p.congestion = get<std::string>(r, "congestion");
  if (r.count("rate")) p.rate = parse_size(get<std::string>(r, "rate"), "--rate");
  if (r.count("busy-poll")) {
    p.busy_poll_us = static_cast<std::uint32_t>(parse_int(get<std::string>(r, "busy-poll"), "--busy-poll", 0, 1'000'000));
  }
  if (r.count("notsent-lowat")) p.notsent_lowat = parse_size(get<std::string>(r, "notsent-lowat"), "--notsent-lowat");
  if (r.count("cpus")) p.cpus = parse_cpu_list(get<std::string>(r, "cpus"), "--cpus");
  RunRequest req;
  req.spec = TestSpec::make(p);
  // Fail early and clearly rather than after agents were set up.
  (void)make_engine(req.spec.transport());
  req.interval = parse_duration(get<std::string>(r, "interval"), "--interval");
  if (req.interval < std::chrono::milliseconds(10)) throw UsageError("--interval: must be at least 0.01 s");
  req.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      parse_duration(get<std::string>(r, "connect-timeout"), "--connect-timeout"));
  if (req.connect_timeout < std::chrono::milliseconds(100)) throw UsageError("--connect-timeout: must be at least 0.1 s");

  const std::string key_file = key_file_option(r);
  // Launched agents get a one-time key instead (cli::start_launch refuses --key-file).
  if (!key_file.empty() && !r.count("launch")) req.key = auth::load_key_file(key_file);

  const bool quiet = r.count("quiet") > 0;
  const bool verbose = r.count("verbose") > 0;
  const std::string json_path = r.count("json") ? get<std::string>(r, "json") : "";

  // Declared before the run so it outlives it: destroying it stops the launched agents.
  const auto launched = cli::start_launch(r, req, host_list);
  std::unique_ptr<LocalAgents> local;
  if (launched) {
    // servers, clients and key come from the launcher
  } else if (r.count("local")) {
    if (r.count("servers") || r.count("clients")) throw UsageError("--local: cannot be combined with --servers/--clients");
    const int n = get<int>(r, "local");
    if (n < 2 || n > 64) throw UsageError(fmt::format("--local {}: out of range (2..64)", n));
    local = std::make_unique<LocalAgents>(n, "warn", key_file);
    const auto& eps = local->endpoints();
    const std::size_t n_servers = eps.size() / 2;
    req.servers.assign(eps.begin(), eps.begin() + static_cast<std::ptrdiff_t>(n_servers));
    req.clients.assign(eps.begin() + static_cast<std::ptrdiff_t>(n_servers), eps.end());
  } else {
    if (!r.count("servers") || !r.count("clients")) {
      throw UsageError("give --servers and --clients (host[:port],...), or --local N");
    }
    req.servers = host_list(get<std::string>(r, "servers"), "--servers");
    req.clients = host_list(get<std::string>(r, "clients"), "--clients");
    for (const auto& c : req.clients) {
      for (const auto& s : req.servers) {
        if (c.host == s.host && c.port == s.port) {
          throw UsageError(fmt::format("--clients: {} is also a server (a node is either a client or a server)", c.str()));
        }
      }
    }
    // Per-link pinning pairs link i of a client with link i of a server: counts must match.
    std::size_t links = 0;
    std::string first;
    for (const auto* list : {&req.servers, &req.clients}) {
      for (const auto& h : *list) {
        if (h.links.empty()) continue;
        if (links == 0) {
          links = h.links.size();
          first = h.str();
        } else if (h.links.size() != links) {
          throw UsageError(fmt::format("{} has {} link addresses but {} has {}: give every node the same number",
                                       h.str(), h.links.size(), first, links));
        }
      }
    }
    if (links > 0) {
      for (const auto* list : {&req.servers, &req.clients}) {
        for (const auto& h : *list) {
          if (h.links.empty()) {
            throw UsageError(fmt::format("{} has no link addresses while {} has {}: give every node NAME@ADDR+ADDR...",
                                         h.str(), first, links));
          }
        }
      }
    }
  }

  const RunRecord record = run_test(req);
  // run_test's own SIGINT/SIGTERM handling ended with it; keep the launched agents' clean-up.
  if (launched) launch::install_interrupt_flag();
  const Report report = compute_report(record);
  const auto doc = render_json(report);
  if (json_path == "-") {
    std::cout << doc.dump(2) << "\n";
  } else {
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << doc.dump(2) << "\n";
      if (!out) {
        std::cout << render_text(report, verbose);
        throw SystemError("write results to", json_path, errno);
      }
    }
    std::cout << (quiet ? render_summary_line(report) + "\n" : render_text(report, verbose));
  }
  return report.complete ? 0 : static_cast<int>(ExitCode::infrastructure);
}

int cmd_links(int argc, char** argv) {
  cxxopts::Options o("fabperf links", "List this host's network interfaces.");
  o.add_options()("json", "print JSON instead of a table")("a,all", "include interfaces that are down")("h,help", "this help");
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help();
    return 0;
  }
  const auto links = read_links();
  const auto limits = read_socket_limits();
  std::vector<BondInfo> bonds;
  for (const auto& l : links) {
    if (l.kind != "bond") continue;
    if (auto b = read_bond(l.name)) bonds.push_back(std::move(*b));
  }
  if (r.count("json")) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& l : links) arr.push_back(to_json(l));
    nlohmann::json barr = nlohmann::json::array();
    for (const auto& b : bonds) {
      auto j = to_json(b);
      j["findings"] = bond_findings(b);
      barr.push_back(std::move(j));
    }
    std::cout << nlohmann::json{{"links", arr}, {"bonds", barr}, {"socket_limits", to_json(limits)}}.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<16} {:<9} {:<10} {:<6} {:>10} {:<7} {:>6} {:<18} {}\n", "interface", "kind", "driver", "state",
                           "speed Mb/s", "duplex", "mtu", "master/members", "addresses");
  for (const auto& l : links) {
    if (!r.count("all") && l.operstate == "down") continue;
    std::string rel = l.master;
    if (!l.members.empty()) {
      for (const auto& m : l.members) rel += (rel.empty() ? "" : "+") + m;
    }
    if (!l.vlan_parent.empty()) rel = "vlan of " + l.vlan_parent;
    std::string addrs;
    for (const auto& a : l.addresses) addrs += (addrs.empty() ? "" : " ") + a;
    std::cout << fmt::format("{:<16} {:<9} {:<10} {:<6} {:>10} {:<7} {:>6} {:<18} {}\n", l.name, l.kind,
                             l.driver.empty() ? "-" : l.driver, l.operstate,
                             l.speed_mbps > 0 ? std::to_string(l.speed_mbps) : "-", l.duplex, l.mtu,
                             rel.empty() ? "-" : rel, addrs.empty() ? "-" : addrs);
  }
  std::cout << render_bond_inventory_text(bonds);
  std::cout << fmt::format("\nsocket limits: net.core.rmem_max {} wmem_max {}; tcp_rmem {} {} {}; tcp_wmem {} {} {}\n",
                           limits.rmem_max, limits.wmem_max, limits.tcp_rmem[0], limits.tcp_rmem[1], limits.tcp_rmem[2],
                           limits.tcp_wmem[0], limits.tcp_wmem[1], limits.tcp_wmem[2]);
  return 0;
}

int cmd_compare(int argc, char** argv) {
  cxxopts::Options o("fabperf compare", "Compare two fabperf results link by link: fabperf compare BEFORE.json AFTER.json");
  o.add_options()
    ("expect-gain", "every link must gain at least PCT percent (e.g. 40 for 40GbE -> 56GbE)", cxxopts::value<std::string>())
    ("json", "also write the comparison as JSON to FILE ('-' = stdout only)", cxxopts::value<std::string>())
    ("files", "", cxxopts::value<std::vector<std::string>>())
    ("h,help", "this help");
  o.parse_positional({"files"});
  o.positional_help("BEFORE.json AFTER.json");
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help();
    return 0;
  }
  const auto files = r.count("files") ? get<std::vector<std::string>>(r, "files") : std::vector<std::string>{};
  if (files.size() != 2) throw UsageError("compare: give exactly two result files: BEFORE.json AFTER.json");
  CompareOptions opts;
  if (r.count("expect-gain")) {
    const auto& t = get<std::string>(r, "expect-gain");
    std::string num = t;
    if (!num.empty() && num.back() == '%') num.pop_back();
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || !(v > -100 && v < 10000)) {
      throw UsageError(fmt::format("--expect-gain '{}': expected a percentage such as 40", t));
    }
    opts.expect_gain_pct = v;
  }
  const auto before = load_result_file(files[0]);
  const auto after = load_result_file(files[1]);
  const Comparison c = compare_results(before, after, files[0], files[1], opts);
  const std::string json_path = r.count("json") ? get<std::string>(r, "json") : "";
  if (json_path == "-") {
    std::cout << render_comparison_json(c).dump(2) << "\n";
  } else {
    std::cout << render_comparison_text(c);
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << render_comparison_json(c).dump(2) << "\n";
      if (!out) throw SystemError("write comparison to", json_path, errno);
    }
  }
  return c.failed ? static_cast<int>(ExitCode::kpi_failed) : 0;
}

int cmd_shell(int argc, char** argv) {
  cxxopts::Options o("fabperf shell", "nsdperf-compatible command shell: fabperf shell [-i FILE] [COMMAND...]");
  o.add_options()
    ("i,input", "read commands from FILE (may repeat)", cxxopts::value<std::vector<std::string>>())
    ("key-file", "shared key (from 'fabperf keygen') to prove to the agents. Default: $FABPERF_KEY_FILE",
     cxxopts::value<std::string>())
    ("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("warn"))
    ("commands", "", cxxopts::value<std::vector<std::string>>())
    ("h,help", "this help");
  o.parse_positional({"commands"});
  o.positional_help("[COMMAND...]");
  auto r = parse(o, argc, argv);
  if (r.count("help")) {
    std::cout << o.help();
    return 0;
  }
  setup_logging(get<std::string>(r, "log-level"));
  ShellOptions so;
  if (r.count("input")) so.input_files = get<std::vector<std::string>>(r, "input");
  if (r.count("commands")) so.commands = get<std::vector<std::string>>(r, "commands");
  so.key_file = key_file_option(r);
  return run_shell(so);
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return static_cast<int>(ExitCode::usage);
  }
  const std::string cmd = argv[1];
  if (cmd == "agent") return cmd_agent(argc - 1, argv + 1);
  if (cmd == "run") return cmd_run(argc - 1, argv + 1);
  if (cmd == "links") return cmd_links(argc - 1, argv + 1);
  if (cmd == "compare") return cmd_compare(argc - 1, argv + 1);
  if (cmd == "shell") return cmd_shell(argc - 1, argv + 1);
  if (cmd == "keygen") return cmd_keygen(argc - 1, argv + 1);
  if (cmd == "version" || cmd == "--version") {
    std::cout << "fabperf " << FABPERF_VERSION << (FABPERF_HAVE_RDMA ? " (rdma-core found)" : " (without RDMA)") << "\n";
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage;
    return 0;
  }
  throw UsageError(fmt::format("unknown command '{}' (try 'fabperf help')", cmd));
}

}  // namespace
}  // namespace fabperf

int main(int argc, char** argv) {
  try {
    return fabperf::dispatch(argc, argv);
  } catch (const fabperf::Error& e) {
    std::cerr << "fabperf: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "fabperf: internal error: " << e.what() << "\n";
    return static_cast<int>(fabperf::ExitCode::internal);
  }
}
