// fabperf: one binary, subcommands over the core library. Parsing and validation only; the work
// happens in the library. Exit codes: docs/usage.md.

#include <fabperf/agent/agent.hpp>
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/stop.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_stream.hpp>
#include <fabperf/shell/shell.hpp>

#include "cli/options.hpp"

#include <poll.h>
#include <unistd.h>
#include <iostream>

namespace fabperf {
namespace {

constexpr const char* kUsage = R"(usage: fabperf <command> [options]

commands:
  agent     run a node agent (listens on TCP 6668)
  run       run a test against agents (or --local N agents on this host); 'run PLAN' runs a plan file,
            'run --pattern NAME' a traffic pattern (docs/plans.md)
  plan      'fabperf plan check PLAN': validate a plan file and print what would run
  preflight check agents, data connections, MTU/MSS, link speeds, buffers, clocks, bonds and PCIe slots before a plan
  links     list network interfaces (this host, or agents: links HOST...): speed, MTU, bonds, PCIe/NUMA, socket limits
  compare   compare results before/after a change, link by link; sets of trials with statistics
  report    render results (a plan's results file or a run's JSON): text, json, csv, junit, html
  monitor   probe the fabric continuously, export Prometheus /metrics, alert on drift (docs/monitor.md)
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

using cli::get;
using cli::get_or;
using cli::host_list;

int cmd_keygen(int argc, char** argv) {
  cxxopts::Options o("fabperf keygen", "Write a new random shared key for agents and coordinators (mode 0600).");
  o.add_options()("file", "key file to create", cxxopts::value<std::string>())("force", "replace an existing file")(
      "h,help", "this help");
  auto r = cli::parse_options(o, argc, argv, {"file"}, "FILE");
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
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{0, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      throw UsageError("--key-stdin: no key line on stdin within 30 s");
    }
    char c = 0;
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw UsageError("--key-stdin: stdin ended before a key line");
    if (c == '\n') break;
    if (line.size() > 4 * auth::kMaxKeyBytes)
      throw UsageError("--key-stdin: the first line of stdin is too long for a key");
    line.push_back(c);
  }
  auth::Key key = auth::parse_key(line, "stdin");
  std::fill(line.begin(), line.end(), '\0');
  return key;
}

int cmd_agent(int argc, char** argv) {
  cxxopts::Options o("fabperf agent", "Run a fabperf node agent.");
  auto add = o.add_options();
  add("listen", "address and port to listen on ([::]:6668 = all addresses)",
      cxxopts::value<std::string>()->default_value("[::]:6668"));
  add("ready-fd", "write 'LISTENING host:port' to this file descriptor once listening",
      cxxopts::value<int>()->default_value("-1"));
  add("max-duration", "longest test this agent accepts", cxxopts::value<std::string>()->default_value("3600"));
  add("max-buffer-memory", "most buffer memory a test may make this agent allocate",
      cxxopts::value<std::string>()->default_value("1G"));
  add("key-file", "shared key (from 'fabperf keygen'); coordinators must prove it. Default: $FABPERF_KEY_FILE",
      cxxopts::value<std::string>());
  add("insecure", "without a key, still listen on non-loopback addresses and obey any coordinator");
  add("no-remote-kill", "refuse the shell's kill/killall (SHUTDOWN); stop this agent through its launcher");
  add("key-stdin", "read the shared key (hex) from the first line of stdin, as 'run --launch' passes it");
  add("exit-on-stdin-eof", "stop when stdin reaches end of file (the launcher holds it open)");
  add("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("info"));
  add("h,help", "this help");
  auto r = cli::parse_options(o, argc, argv);
  cli::setup_logging(get<std::string>(r, "log-level"));
  AgentOptions a;
  const auto hp = parse_host_port(get<std::string>(r, "listen"), "--listen");
  a.listen_host = hp.host;
  a.listen_port = hp.port;
  a.ready_fd = get<int>(r, "ready-fd");
  const auto md = parse_duration(get<std::string>(r, "max-duration"), "--max-duration");
  if (md < std::chrono::seconds(1)) throw UsageError("--max-duration: must be at least 1 s");
  a.max_duration = std::chrono::duration_cast<std::chrono::seconds>(md);
  a.max_buffer_memory = parse_size(get<std::string>(r, "max-buffer-memory"), "--max-buffer-memory");
  a.insecure = r.count("insecure") > 0;
  a.allow_remote_kill = r.count("no-remote-kill") == 0;
  a.exit_on_stdin_eof = r.count("exit-on-stdin-eof") > 0;
  if (r.count("key-stdin")) {
    if (a.insecure) throw UsageError("--insecure: cannot be combined with --key-stdin");
    if (r.count("key-file")) throw UsageError("--key-stdin: cannot be combined with --key-file");
    a.key = read_key_from_stdin();
    a.key_source = "stdin";
  } else if (const std::string key_file = cli::key_file_option(r); !key_file.empty()) {
    if (a.insecure) throw UsageError("--insecure: cannot be combined with a key file (--key-file or FABPERF_KEY_FILE)");
    a.key = auth::load_key_file(key_file);
    a.key_source = key_file;
  }
  return run_agent(a);
}

// The test settings' options, from the one table: a bare switch for a flag, a value otherwise;
// the default and nsdperf's name go into the help text.
void add_setting_options(cxxopts::Options& o) {
  for (const auto& st : spec_settings()) {
    std::string help = st.help;
    if (*st.deflt) help += fmt::format(" (default: {})", st.deflt);
    if (*st.nsdperf) help += fmt::format(" [nsdperf: {}]", st.nsdperf);
    if (st.kind == SettingKind::flag) {
      o.add_options(st.group)(st.name, help);
    } else {
      o.add_options(st.group)(st.name, help, cxxopts::value<std::string>(), st.value);
    }
  }
}

// The settings given on the command line; unset ones keep TestSpec::make's defaults.
SpecParams setting_params(const cxxopts::ParseResult& r) {
  SpecParams p;
  for (const auto& st : spec_settings()) {
    if (!r.count(st.name)) continue;
    st.apply(p, st.kind == SettingKind::flag ? "true" : get<std::string>(r, st.name), fmt::format("--{}", st.name));
  }
  refuse_inapplicable(p);
  return p;
}

void add_run_options(cxxopts::Options& o) {
  o.add_options("hosts")(
      "servers", "server agents: host[:port][@LINKADDR+LINKADDR...],... (port 6668 by default; [v6addr]:port)",
      cxxopts::value<std::string>())("clients", "client agents: host[:port],...", cxxopts::value<std::string>())(
      "local", "start N agents on this host (127.0.0.1) and split them into servers and clients",
      cxxopts::value<int>());
  // Every test setting comes from the one table (include/fabperf/core/settings.hpp), as do the run's
  // own (--interval, --concurrent-pairs, --ring-k, --per-link): each after its group's options above.
  add_setting_options(o);
  // Patterns, plan files, results and KPIs (docs/plans.md): handled by cli/cmd_plan.cpp.
  o.add_options("plan")("plan", "plan file (TOML) to run: fabperf run PLAN", cxxopts::value<std::string>())(
      "pattern",
      "traffic pattern: bipartite, pairs, each-vs-rest, halves, all-pairs, ring, incast, broadcast, all-to-all",
      cxxopts::value<std::string>())(
      "hosts", "agents for a pattern: host[:port][@LINK+LINK],... (instead of --servers/--clients)",
      cxxopts::value<std::string>())("pairs",
                                     "pattern pairs: CLIENT->SERVER,... (host names; n1, n2, ... with --local)",
                                     cxxopts::value<std::string>());
  o.add_options("per-link")(
      "bind-dev",
      "SO_BINDTODEVICE for client flows: 'auto' (the device of each link address) or DEV[+DEV...], one per link",
      cxxopts::value<std::string>());
  for (const auto& st : run_settings())
    o.add_options(st.group)(st.name, st.help, cxxopts::value<std::string>()->default_value(st.deflt));
  o.add_options("plan")("target", "incast: the receiver; broadcast: the sender (host name)",
                        cxxopts::value<std::string>())(
      "kpi", "threshold NAME=VALUE (may repeat), e.g. min-node-mbps=2000", cxxopts::value<std::vector<std::string>>())(
      "kpi-profile", "ready-made KPI set: ibm-readiness", cxxopts::value<std::string>())(
      "results", "JSON Lines results file (default: NAME-DATE-TIME.jsonl)", cxxopts::value<std::string>())(
      "resume", "continue a plan from its results file without re-running finished steps",
      cxxopts::value<std::string>())("no-preflight", "skip the pre-flight checks before a plan or pattern")(
      "repeat",
      "run N trials of the test (a pattern: of every step) into one results file; 'fabperf compare' judges them",
      cxxopts::value<std::string>()->default_value("1"))(
      "isolate",
      "pattern: when a test fails a KPI or spreads widely, retest the suspects and name the slow node and link")(
      "allow-hooks", "let a plan's [ab] hooks run their commands on this host");
  o.add_options("output")("json", "write the full result as JSON to FILE ('-' = stdout, text report suppressed)",
                          cxxopts::value<std::string>())("v,verbose", "add the per-connection table")(
      "q,quiet", "print only the nsdperf-style summary line");
  cli::add_common_options(o, cli::kKeyFile | cli::kConnectTimeout | cli::kLogLevel, "output");
  cli::add_launch_options(o);
}

// --servers/--clients without a pattern: no node is both, and all have as many link addresses.
void check_servers_clients(const RunRequest& req) {
  for (const auto& c : req.clients) {
    if (std::any_of(req.servers.begin(), req.servers.end(),
                    [&](const HostPort& s) { return c.host == s.host && c.port == s.port; }))
      throw UsageError(fmt::format("--clients: {} is also a server (a node is either a client or a server)", c.str()));
  }
  // Per-link pinning pairs link i of a client with link i of a server: counts must match.
  const HostPort& first = req.servers.front();
  for (const auto* list : {&req.servers, &req.clients}) {
    for (const auto& h : *list) {
      if (h.links.size() != first.links.size()) {
        throw UsageError(
            fmt::format("{} has {} link addresses but {} has {}: give every node the same number "
                        "(NAME@ADDR+ADDR...)",
                        h.str(), h.links.size(), first.str(), first.links.size()));
      }
    }
  }
}

// One test (or one per link) between req.servers and req.clients.
int run_single(const cxxopts::ParseResult& r, RunRequest& req) {
  const bool quiet = r.count("quiet") > 0;
  const bool verbose = r.count("verbose") > 0;
  const auto json_path = get_or<std::string>(r, "json");

  std::size_t n_links = 0;
  for (const auto& h : req.servers) n_links = std::max(n_links, h.links.size());
  for (const auto& h : req.clients) n_links = std::max(n_links, h.links.size());
  if (r.count("bind-dev")) req.bind_devs = cli::bind_dev_option(get<std::string>(r, "bind-dev"), n_links);

  // On a terminal (stderr), a live line while it works: never with --quiet, never in the output.
  const bool live = !quiet && ::isatty(STDERR_FILENO) == 1;
  if (live) {
    req.progress = [](double e, double total, double mb) {
      std::cerr << "\r\033[K" << progress_text(e, total, mb) << std::flush;
    };
  }
  // The JSON result is written as the agents' results arrive (docs/usage.md, "Written as collected").
  ResultStream results(json_path, verbose);
  req.sink = &results;
  if (live)
    std::cerr << fmt::format("setting up {} server(s) and {} client(s)", req.servers.size(), req.clients.size())
              << std::flush;
  const RunRecord record = run_test(req);
  if (live) std::cerr << "\r\033[K" << std::flush;
  // run_test's own SIGINT/SIGTERM handling ended with it; keep the launched agents' clean-up.
  if (r.count("launch")) stop::mark();
  const Report report = results.finish(record);
  if (results.write_error() != 0) {
    if (json_path != "-") std::cout << render_text(report, verbose);
    throw SystemError("write results to", json_path == "-" ? "standard output" : json_path, results.write_error());
  }
  if (json_path != "-") std::cout << (quiet ? render_summary_line(report) + "\n" : render_text(report, verbose));
  return report.complete ? 0 : static_cast<int>(ExitCode::infrastructure);
}

int cmd_run(int argc, char** argv) {
  cxxopts::Options o("fabperf run", "Run a throughput test between fabperf agents.");
  add_run_options(o);
  auto r = cli::parse_options(o, argc, argv, {"plan"}, "[PLAN]",
                              {"hosts", "test", "tuning", "per-link", "bonding", "rdma", "plan", "output", "launch"});
  cli::setup_logging(get<std::string>(r, "log-level"));

  plan::RunOptions pro;
  pro.quiet = r.count("quiet") > 0;
  pro.progress = ::isatty(STDOUT_FILENO) == 1;
  pro.preflight = r.count("no-preflight") == 0;
  if (r.count("results")) pro.results = get<std::string>(r, "results");
  if (r.count("resume")) pro.resume = get<std::string>(r, "resume");
  pro.allow_hooks = r.count("allow-hooks") > 0;
  const auto repeat = static_cast<std::uint32_t>(parse_int(get<std::string>(r, "repeat"), "--repeat", 1, 1000));
  RunParams run;  // the run settings of the table
  for (const auto& st : run_settings()) st.apply(run, get<std::string>(r, st.name), fmt::format("--{}", st.name));
  // --repeat N is a one-test plan run N times, --per-link sequential a one-test plan of a step per
  // link: one executor, one results file for every sequence.
  const bool plan_mode = r.count("plan") || r.count("pattern") || r.count("results") || r.count("resume") ||
                         r.count("kpi") || r.count("kpi-profile") || repeat > 1 || run.per_link_sequential;
  if (r.count("plan")) {
    // A plan sets its own hosts and settings: every other option given here is refused by name,
    // so an option added later cannot be ignored silently either.
    constexpr std::string_view kWithPlan[] = {"plan",     "results",         "resume",    "no-preflight", "quiet",
                                              "key-file", "connect-timeout", "log-level", "allow-hooks"};
    for (const auto& kv : r.arguments()) {
      if (std::ranges::find(kWithPlan, kv.key()) == std::end(kWithPlan))
        throw UsageError(fmt::format("--{}: not with a plan file (set it in the plan; docs/plans.md)", kv.key()));
    }
    const auto pl = plan::load_plan(get<std::string>(r, "plan"));
    pro.key = cli::key_option(r);
    pro.connect_timeout = cli::connect_timeout_option(r, false);
    return plan::run_plan(pl, pro, std::cout);
  }
  if (!plan_mode) {
    for (const auto& opt : {"hosts", "pairs", "target", "no-preflight", "isolate", "allow-hooks"}) {
      if (r.count(opt)) throw UsageError(fmt::format("--{}: only with --pattern or a plan", opt));
    }
    if (r.count("concurrent-pairs") || r.count("ring-k"))
      throw UsageError("--concurrent-pairs/--ring-k: only with --pattern");
  } else if (r.count("json") || r.count("verbose")) {
    throw UsageError(
        "--json/--verbose: a pattern, --repeat or --per-link sequential run writes its results with --results "
        "(render them with 'fabperf report')");
  }

  const SpecParams p = setting_params(r);
  RunRequest req;
  req.spec = TestSpec::make(p);
  // Fail early and clearly rather than after agents were set up.
  (void)make_engine(req.spec.transport());
  req.interval = run.interval;
  req.connect_timeout = cli::connect_timeout_option(r, true);

  // Launched agents get a one-time key instead (cli::start_launch refuses --key-file).
  if (!r.count("launch")) req.key = cli::key_option(r);

  // Declared before the run so they outlive it: destroying them stops the agents. --local: the
  // first half serve, as with --launch slurm.
  auto agents = cli::start_launch(r, req);
  if (!agents && r.count("local")) {
    if (r.count("servers") || r.count("clients") || r.count("hosts"))  // --hosts: only given in plan mode
      throw UsageError(plan_mode ? "--local: cannot be combined with --servers/--clients/--hosts"
                                 : "--local: cannot be combined with --servers/--clients");
    agents = cli::start_local_agents(r, req.key);
    cli::assign_endpoints(req, agents->endpoints(), agents->endpoints().size() / 2);
  }
  if (!agents && !r.count("hosts")) {  // --hosts: a pattern's (run_pattern)
    if (!r.count("servers") || !r.count("clients")) {
      throw UsageError(plan_mode ? "give --hosts, --servers and --clients, or --local N"
                                 : "give --servers and --clients (host[:port],...), or --local N");
    }
    req.servers = host_list(get<std::string>(r, "servers"), "--servers");
    req.clients = host_list(get<std::string>(r, "clients"), "--clients");
    if (!plan_mode) check_servers_clients(req);
  }
  return plan_mode ? cli::run_pattern(r, req, pro, repeat, run) : run_single(r, req);
}

int cmd_shell(int argc, char** argv) {
  cxxopts::Options o("fabperf shell", "nsdperf-compatible command shell: fabperf shell [-i FILE] [COMMAND...]");
  o.add_options()("i,input", "read commands from FILE (may repeat)", cxxopts::value<std::vector<std::string>>())(
      "commands", "", cxxopts::value<std::vector<std::string>>());
  cli::add_common_options(o, cli::kKeyFile | cli::kLogLevel);
  auto r = cli::parse_options(o, argc, argv, {"commands"}, "[COMMAND...]");
  cli::setup_logging(get<std::string>(r, "log-level"));
  ShellOptions so;
  if (r.count("input")) so.input_files = get<std::vector<std::string>>(r, "input");
  if (r.count("commands")) so.commands = get<std::vector<std::string>>(r, "commands");
  so.key_file = cli::key_file_option(r);
  return run_shell(so);
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return static_cast<int>(ExitCode::usage);
  }
  const std::string cmd = argv[1];
  static constexpr std::pair<std::string_view, int (*)(int, char**)> kCommands[] = {
      {"agent", cmd_agent},        {"run", cmd_run},
      {"plan", cli::cmd_plan},     {"preflight", cli::cmd_preflight},
      {"links", cli::cmd_links},   {"compare", cli::cmd_compare},
      {"report", cli::cmd_report}, {"monitor", cli::cmd_monitor},
      {"shell", cmd_shell},        {"keygen", cmd_keygen}};
  for (const auto& [name, fn] : kCommands) {
    if (cmd == name) return fn(argc - 1, argv + 1);
  }
  if (cmd == "version" || cmd == "--version") {
    std::cout << "fabperf " << FABPERF_VERSION << (FABPERF_HAVE_RDMA ? " (rdma-core found)" : " (without RDMA)")
              << "\n";
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
  // The one owner of SIGINT, SIGTERM and SIGPIPE: the library never installs handlers itself.
  // Commands that only read files and write a report keep the default dispositions: nothing of
  // theirs counts stop requests, so Ctrl-C must end them at once (a report of gigabytes of
  // results reads for minutes).
  const std::string_view cmd = argc > 1 ? argv[1] : "";
  if (cmd != "report" && cmd != "compare" && cmd != "keygen") fabperf::stop::install_stop_handlers();
  try {
    return fabperf::dispatch(argc, argv);
  } catch (const fabperf::cli::HelpShown&) {
    return 0;
  } catch (const fabperf::Error& e) {
    std::cerr << "fabperf: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "fabperf: internal error: " << e.what() << "\n";
    return static_cast<int>(fabperf::ExitCode::internal);
  }
}
