// `fabperf plan check`, `fabperf preflight`, and the one-test plan `fabperf run --pattern` builds
// from its options; the executor itself is the library's (include/fabperf/plan/plan_run.hpp).
#include "cli/commands.hpp"
#include "cli/launch_cli.hpp"
#include "cli/options.hpp"

#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/plan/plan_run.hpp>

#include <fmt/format.h>
#include <cstdlib>
#include <cxxopts.hpp>
#include <iostream>

namespace fabperf::cli {

std::vector<std::string> bind_dev_option(const std::string& text, std::size_t n_links) {
  return prefix_errors("--bind-dev ", [&] { return plan::parse_bind_devs(text, n_links); });
}

plan::Plan plan_from_cli(std::vector<plan::PlanHost> hosts, const CliPattern& c, const TestSpec& spec,
                         std::chrono::nanoseconds interval) {
  plan::Plan p;
  p.name = "run-" + c.pattern;
  p.file = "(command line)";
  p.hosts = std::move(hosts);
  p.repeat = c.repeat;
  p.isolate = c.isolate;
  plan::PlanTest t = plan::pattern_test(p, c.pattern, c.pairs, c.target, c.concurrent_pairs, c.k);
  t.spec = spec;
  t.interval = interval;
  if (!c.kpi_profile.empty()) t.kpis = plan::kpi_profile(c.kpi_profile);
  for (const auto& kv : c.kpis) {
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
  t.per_link_sequential = c.per_link_sequential;
  if (!c.bind_dev.empty()) t.bind_devs = bind_dev_option(c.bind_dev, p.hosts.front().hp.links.size());
  prefix_errors("--", [&] { plan::normalize(p, t); });  // "per-link sequential: ..."
  p.tests.push_back(std::move(t));
  return p;
}

int cmd_plan(int argc, char** argv) {
  cxxopts::Options o("fabperf plan", "Plans: 'fabperf plan check PLAN' validates a plan and prints what would run.");
  o.add_options()("args", "", cxxopts::value<std::vector<std::string>>())("h,help", "this help");
  o.parse_positional({"args"});
  o.positional_help("check PLAN");
  const auto r = cli::parse_options(o, argc, argv);
  if (help_printed(o, r)) return 0;
  const auto args = r.count("args") ? r["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
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
      "clock-warn", "warn when wall clocks differ by more seconds", cxxopts::value<double>()->default_value("1"))(
      "h,help", "this help");
  cli::add_agent_options(o, cli::kKeyFile | cli::kConnectTimeout);
  o.parse_positional({"plan"});
  o.positional_help("[PLAN]");
  const auto r = cli::parse_options(o, argc, argv);
  if (help_printed(o, r)) return 0;
  const std::string key_file = cli::key_file_option(r);
  auth::Key key = key_file.empty() ? auth::Key{} : auth::load_key_file(key_file);
  const auto timeout = cli::connect_timeout_option(r, false);
  std::unique_ptr<LocalAgents> local;
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
      local = start_local_agents(r["local"].as<int>(), key_file, key);
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
