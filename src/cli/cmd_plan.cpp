// `fabperf plan check`, `fabperf preflight`, and the one-test plan `fabperf run --pattern` builds
// from its options; the executor itself is the library's (include/fabperf/plan/plan_run.hpp).
#include "cli/options.hpp"

#include <cstdlib>
#include <iostream>

namespace fabperf::cli {

std::vector<std::string> bind_dev_option(const std::string& text, std::size_t n_links) {
  return prefix_errors("--bind-dev ", [&] { return plan::parse_bind_devs(text, n_links); });
}

int run_pattern(const cxxopts::ParseResult& r, RunRequest& req, plan::RunOptions pro, std::uint32_t repeat,
                const RunParams& run) {
  plan::Plan p;
  if (r.count("hosts")) {
    if (r.count("launch")) throw UsageError("--hosts: not with --launch (give --servers and --clients)");
    if (r.count("servers") || r.count("clients"))
      throw UsageError("--hosts: cannot be combined with --servers/--clients");
    for (auto& h : host_list(get<std::string>(r, "hosts"), "--hosts")) p.hosts.push_back({h.str(), h, true, true});
  }
  const auto name = [&](const HostPort& h) {  // --local's agents are n1, n2, ...
    return r.count("local") ? fmt::format("n{}", p.hosts.size() + 1) : h.str();
  };
  for (const auto& h : req.servers) p.hosts.push_back({name(h), h, false, true});
  for (const auto& h : req.clients) p.hosts.push_back({name(h), h, true, false});
  const std::string pattern = r.count("pattern") ? get<std::string>(r, "pattern") : "bipartite";
  p.name = "run-" + pattern;
  p.file = "(command line)";
  p.repeat = repeat;
  p.isolate = r.count("isolate") > 0;
  plan::PlanTest t = plan::pattern_test(p, pattern, get_or<std::string>(r, "pairs"), get_or<std::string>(r, "target"),
                                        run.concurrent_pairs, run.ring_k);
  t.spec = req.spec;
  t.interval = req.interval;
  if (r.count("kpi-profile")) t.kpis = plan::kpi_profile(get<std::string>(r, "kpi-profile"));
  for (const auto& kv : get_or<std::vector<std::string>>(r, "kpi")) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      throw UsageError(fmt::format("--kpi '{}': expected NAME=VALUE, e.g. min-node-mbps=2000", kv));
    const std::string v = kv.substr(eq + 1);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size())
      throw UsageError(fmt::format("--kpi '{}': '{}' is not a number", kv, v));
    prefix_errors("--kpi: ", [&] { plan::set_kpi(t.kpis, kv.substr(0, eq), x); });
  }
  t.per_link_sequential = run.per_link_sequential;
  if (r.count("bind-dev"))
    t.bind_devs = bind_dev_option(get<std::string>(r, "bind-dev"), p.hosts.front().hp.links.size());
  prefix_errors("--", [&] { plan::normalize(p, t); });  // "per-link sequential: ..."
  p.tests.push_back(std::move(t));
  pro.key = req.key;
  pro.connect_timeout = req.connect_timeout;
  return plan::run_plan(p, pro, std::cout);
}

int cmd_plan(int argc, char** argv) {
  cxxopts::Options o("fabperf plan", "Plans: 'fabperf plan check PLAN' validates a plan and prints what would run.");
  o.add_options()("args", "", cxxopts::value<std::vector<std::string>>())("h,help", "this help");
  const auto r = cli::parse_options(o, argc, argv, {"args"}, "check PLAN");
  const auto args = get_or<std::vector<std::string>>(r, "args");
  if (args.size() != 2 || args[0] != "check") throw UsageError("plan: usage: fabperf plan check PLAN");
  const auto p = plan::load_plan(args[1]);
  std::cout << plan::describe_plan(p, plan::expand(p));
  std::cout << "plan ok\n";
  return 0;
}

int cmd_preflight(int argc, char** argv) {
  cxxopts::Options o("fabperf preflight",
                     "Check a fabric before a plan: fabperf preflight PLAN | --hosts H,H... | --local N");
  o.add_options()("plan", "", cxxopts::value<std::string>())("hosts", "agents: host[:port][@LINK+LINK],...",
                                                             cxxopts::value<std::string>())(
      "local", "start N agents on this host", cxxopts::value<int>())(
      "socksize", "socket buffer size the tests will ask for", cxxopts::value<std::string>()->default_value("0"))(
      "clock-warn", "warn when wall clocks differ by more seconds", cxxopts::value<double>()->default_value("1"));
  cli::add_common_options(o, cli::kKeyFile | cli::kConnectTimeout);
  const auto r = cli::parse_options(o, argc, argv, {"plan"}, "[PLAN]");
  auth::Key key = cli::key_option(r);
  const auto timeout = cli::connect_timeout_option(r, false);
  std::unique_ptr<launch::Agents> local;
  plan::Plan p;
  const int sources = static_cast<int>(r.count("plan") + r.count("hosts") + r.count("local"));
  if (sources != 1) throw UsageError("preflight: give a plan, --hosts H,H... or --local N");
  if (r.count("plan")) {
    p = plan::load_plan(r["plan"].as<std::string>());
    if (r.count("socksize") || r.count("clock-warn"))
      throw UsageError("preflight: --socksize and --clock-warn come from the plan");
  } else {
    std::vector<HostPort> hps;
    if (r.count("local")) {
      local = start_local_agents(r, key);
      hps = local->endpoints();
    } else {
      for (const auto& item : split_list(r["hosts"].as<std::string>(), ','))
        hps.push_back(parse_host_port(item, "--hosts"));
      if (hps.size() < 2) throw UsageError("--hosts: give at least two agents");
    }
    for (std::size_t i = 0; i < hps.size(); ++i) {
      p.hosts.push_back({local ? fmt::format("n{}", i + 1) : hps[i].str(), hps[i], true, true});
    }
    SpecParams sp;
    sp.socksize = parse_size(r["socksize"].as<std::string>(), "--socksize");
    p.tests.emplace_back().spec = TestSpec::make(sp);
    p.clock_warn_s = r["clock-warn"].as<double>();
    if (!(p.clock_warn_s > 0)) throw UsageError("--clock-warn: must be positive");
  }
  return plan::run_preflight(p, key, timeout, false, std::cout);
}

}  // namespace fabperf::cli
