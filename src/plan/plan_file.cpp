// Plan files in TOML (toml++): every node carries its line, so every mistake is reported as
// FILE:LINE: field 'x': problem. Values go through the same parsers and the same TestSpec::make
// as `fabperf run`'s options: a plan cannot express anything the command line could not.
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/report/compare.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <numeric>
#include <set>

#include <toml++/toml.h>

#include "plan/toml_reader.hpp"

namespace fabperf::plan {
namespace {

using nlohmann::json;

// The keys a test (or [defaults]) may set: every test setting of the table
// (include/fabperf/core/settings.hpp), the sampling interval, the pattern's fields and KPIs.
const std::set<std::string>& test_keys() {
  static const std::set<std::string> k = [] {
    std::set<std::string> keys{"pattern", "hosts", "clients", "servers", "pairs", "target", "bind-dev", "kpis"};
    for (const auto& st : spec_settings()) keys.insert(st.name);
    for (const auto& st : run_settings()) keys.insert(st.key);
    return keys;
  }();
  return k;
}

using Ctx = TomlReader;

// A run setting's field (interval, concurrent-pairs, k, per-link) through the option's own parser
// and range (core/settings.cpp's run table).
RunParams run_setting(const Ctx& c, const toml::node& n, std::string_view key) {
  RunParams rp;
  const auto& st = *std::ranges::find_if(run_settings(), [&](const RunSetting& r) { return r.key == key; });
  c.wrap(&n, key, [&] { st.apply(rp, c.scalar_text(n, key), "value"); });
  return rp;
}

KpiSet parse_kpis(const Ctx& c, const toml::table& t) {
  KpiSet k;
  // The profile first, so explicit thresholds override it wherever they appear in the table.
  if (const auto* p = t.get("profile")) k = c.wrap(p, "profile", [&] { return kpi_profile(c.str(*p, "profile")); });
  for (const auto& [key, v] : t) {
    const std::string name(key.str());
    if (name == "profile") continue;
    if (std::ranges::count(kpi_names(), name) == 0)
      c.fail(&v, name, fmt::format("unknown KPI (profile, {})", fmt::join(kpi_names(), ", ")));
    const double value = c.number(v, name);  // (clang 14 cannot capture the binding v)
    c.wrap(&v, name, [&] { set_kpi(k, name, value); });
  }
  return k;
}

// A test's settings: `defaults` then the test's own table (the test wins).
struct Merged : std::map<std::string, const toml::node*> {
  const toml::node* get(const std::string& k) const { return count(k) ? at(k) : nullptr; }
};

}  // namespace

// The [ab] table: two hook commands, their names and timeout, what the comparison should find.
AbHooks parse_ab(const Ctx& c, const toml::node& n) {
  AbHooks ab;
  const auto& t = c.table(n, "ab");
  c.known_keys(t, {"a", "b", "a-name", "b-name", "hook-timeout", "expect", "expect-rest", "expect-gain"},
               "unknown field of [ab]");
  for (const auto& [k, cmd] : {std::pair{"a", &ab.a}, std::pair{"b", &ab.b}}) {
    const auto* h = t.get(k);
    if (!h) c.fail(&n, k, "missing in [ab]: the command that switches to this configuration (run on this host)");
    *cmd = c.str(*h, k);
    if (cmd->find_first_not_of(" \t") == std::string::npos) c.fail(h, k, "empty command");
  }
  for (const auto& [k, name] : {std::pair{"a-name", &ab.a_name}, std::pair{"b-name", &ab.b_name}}) {
    const auto* h = t.get(k);
    if (h) *name = c.str(*h, k);
    if (h && (name->empty() || name->size() > 40 || name->find_first_of("\n\t") != std::string::npos))
      c.fail(h, k, "use a short name (1..40 characters, one line)");
  }
  if (ab.a_name == ab.b_name) c.fail(&n, "b-name", fmt::format("'{}' names both configurations", ab.a_name));
  if (const auto* h = t.get("hook-timeout")) {
    ab.timeout_s = c.wrap(h, "hook-timeout", [&] {
      return std::chrono::duration<double>(parse_duration(c.scalar_text(*h, "hook-timeout"), "value")).count();
    });
    if (!(ab.timeout_s >= 1 && ab.timeout_s <= 86400)) c.fail(h, "hook-timeout", "must be within 1 s..24 h");
  }
  if (const auto* e = t.get("expect")) ab.expect = c.strings(*e, "expect");
  if (const auto* e = t.get("expect-rest")) ab.expect_rest = c.str(*e, "expect-rest");
  if (const auto* e = t.get("expect-gain")) ab.expect_gain = c.scalar_text(*e, "expect-gain");
  (void)c.wrap(&n, "ab", [&] { return parse_expectations(ab.expect, ab.expect_rest, ab.expect_gain); });
  return ab;
}

// One [[hosts]] table; `earlier` are the hosts before it (names and addresses must differ).
PlanHost parse_host(const Ctx& c, const toml::node& hn, const std::vector<PlanHost>& earlier) {
  auto h = c.host<PlanHost>(hn, {"roles"}, earlier);
  const auto& t = c.table(hn, "hosts");
  if (const auto* r = t.get("roles")) {
    const auto roles = c.strings(*r, "roles");
    h.client = h.server = false;
    for (const auto& role : roles) {
      if (role != "client" && role != "server")
        c.fail(r, "roles", fmt::format("unknown role '{}' (client, server)", role));
      (role == "client" ? h.client : h.server) = true;
    }
    if (roles.empty()) c.fail(r, "roles", "empty list (client, server)");
  }
  return h;
}

std::uint32_t host_index(const Ctx& c, const Plan& plan, const toml::node& n, std::string_view field,
                         const std::string& name) {
  const auto it = std::find_if(plan.hosts.begin(), plan.hosts.end(), [&](const PlanHost& h) { return h.name == name; });
  if (it == plan.hosts.end()) c.fail(&n, field, fmt::format("no host named '{}'", name));
  return static_cast<std::uint32_t>(it - plan.hosts.begin());
}

// A test's pattern and the fields that shape it (hosts, clients and servers, pairs, k, target),
// each refused where its pattern does not use it.
void parse_test_pattern(const Ctx& c, const toml::node& tn, const toml::table& t, const Merged& m, const Plan& plan,
                        PlanTest& pt) {
  const auto* pat = m.get("pattern");
  if (!pat) c.fail(&tn, "pattern", fmt::format("missing in test '{}'", pt.name));
  pt.pattern.pattern = c.wrap(pat, "pattern", [&] { return parse_pattern(c.str(*pat, "pattern")); });
  const Pattern P = pt.pattern.pattern;

  // The nodes the pattern sees: 'hosts' (a subset, in order) or every host.
  if (const auto* hs = m.get("hosts")) {
    for (const auto& n : c.strings(*hs, "hosts")) {
      const auto i = host_index(c, plan, *hs, "hosts", n);
      if (std::find(pt.hosts.begin(), pt.hosts.end(), i) != pt.hosts.end())
        c.fail(hs, "hosts", fmt::format("'{}' is listed twice", n));
      pt.hosts.push_back(i);
    }
  } else {
    pt.hosts.resize(plan.hosts.size());
    std::iota(pt.hosts.begin(), pt.hosts.end(), 0U);
  }
  const auto local = [&](const toml::node& n, std::string_view field, const std::string& hname) {
    const auto gi = host_index(c, plan, n, field, hname);
    const auto it = std::find(pt.hosts.begin(), pt.hosts.end(), gi);
    if (it == pt.hosts.end()) c.fail(&n, field, fmt::format("'{}' is not in this test's hosts", hname));
    return static_cast<std::uint32_t>(it - pt.hosts.begin());
  };
  const auto only_for = [&](const char* key, std::initializer_list<Pattern> ps) {
    const auto* n = t.get(key);
    if (n && std::find(ps.begin(), ps.end(), P) == ps.end()) {
      c.fail(n, key, fmt::format("does not apply to pattern {}", to_string(P)));
    }
    return m.get(key);
  };
  for (const char* key : {"clients", "servers"}) {
    auto& to = std::string_view(key) == "clients" ? pt.pattern.clients : pt.pattern.servers;
    if (const auto* n = only_for(key, {Pattern::bipartite})) {
      for (const auto& s : c.strings(*n, key)) to.push_back(local(*n, key, s));
    }
  }
  if (P == Pattern::bipartite) {
    // Roles decide who is who unless the test names them.
    if (const auto both = std::ranges::find_first_of(pt.pattern.clients, pt.pattern.servers);
        both != pt.pattern.clients.end())
      c.fail(&tn, "clients", fmt::format("'{}' is both a client and a server", plan.hosts[pt.hosts[*both]].name));
    if (pt.pattern.clients.empty() && pt.pattern.servers.empty()) {
      for (std::uint32_t i = 0; i < pt.hosts.size(); ++i) {
        const auto& h = plan.hosts[pt.hosts[i]];
        if (h.client && h.server) {
          c.fail(&tn, "pattern",
                 fmt::format("bipartite: host '{}' has both roles; give it one role or list 'clients' and 'servers'",
                             h.name));
        }
        (h.client ? pt.pattern.clients : pt.pattern.servers).push_back(i);
      }
    }
  }
  if (const auto* n = only_for("pairs", {Pattern::pairs})) {
    for (const auto& s : c.strings(*n, "pairs")) {
      const auto arrow = s.find("->");
      if (arrow == std::string::npos) c.fail(n, "pairs", fmt::format("'{}': expected CLIENT->SERVER", s));
      pt.pattern.pairs.push_back({local(*n, "pairs", s.substr(0, arrow)), local(*n, "pairs", s.substr(arrow + 2))});
    }
  } else if (P == Pattern::pairs) {
    c.fail(&tn, "pairs", "pattern pairs needs a list of pairs such as n1->n2, n3->n4");
  }
  if (const auto* n = only_for("concurrent-pairs", {Pattern::all_pairs}))
    pt.pattern.concurrent_pairs = run_setting(c, *n, "concurrent-pairs").concurrent_pairs;
  if (const auto* n = only_for("k", {Pattern::ring})) pt.pattern.k = run_setting(c, *n, "k").ring_k;
  if (const auto* n = only_for("target", {Pattern::incast, Pattern::broadcast})) {
    pt.pattern.target = local(*n, "target", c.str(*n, "target"));
  }
  // The pattern's own checks (node counts, k range, ...), at the test's line.
  c.wrap(&tn, "pattern", [&] { return make_steps(pt.hosts.size(), pt.pattern); });
}

PlanTest pattern_test(const Plan& plan, const std::string& pattern, const std::string& pairs, const std::string& target,
                      std::uint32_t concurrent_pairs, std::uint32_t k) {
  toml::table t{{"pattern", pattern}};
  if (!pairs.empty()) {
    toml::array a;
    for (const auto& s : split_list(pairs, ',')) a.push_back(s);
    t.insert("pairs", std::move(a));
  }
  if (!target.empty()) t.insert("target", target);
  if (concurrent_pairs != 1) t.insert("concurrent-pairs", std::int64_t{concurrent_pairs});
  if (k != 1) t.insert("k", std::int64_t{k});
  Merged m;
  for (const auto& [key, v] : t) m[std::string(key.str())] = &v;
  PlanTest pt;
  pt.name = pattern;
  parse_test_pattern(Ctx(""), t, t, m, plan, pt);
  return pt;
}

Plan parse_plan(std::string_view text, const std::string& file) {
  Ctx c(file);
  const toml::table root = Ctx::parse(text, file);
  Plan plan;
  plan.file = file;
  plan.name = file;
  c.known_keys(root, {"name", "clock-warn", "repeat", "isolate", "ab", "hosts", "defaults", "tests", "kpis"},
               "unknown top-level field");
  if (const auto* n = root.get("repeat"))
    plan.repeat = static_cast<std::uint32_t>(c.integer(*n, "repeat", 1, 1000, " trials"));
  if (const auto* n = root.get("isolate")) plan.isolate = c.boolean(*n, "isolate");
  if (const auto* n = root.get("ab")) plan.ab = parse_ab(c, *n);
  if (const auto* n = root.get("name")) plan.name = c.str(*n, "name");
  if (const auto* n = root.get("clock-warn")) {
    plan.clock_warn_s = c.number(*n, "clock-warn");
    if (!(plan.clock_warn_s > 0 && plan.clock_warn_s <= 3600))
      c.fail(n, "clock-warn", "must be within 0..3600 seconds");
  }

  plan.hosts = c.hosts<PlanHost>(root, 1, "one",
                                 [&](const toml::node& hn, const auto& before) { return parse_host(c, hn, before); });

  // The settings of [defaults], then of each test over them (a test also has its name).
  const auto merge_keys = [&](const toml::table& t, Merged& m, bool test) {
    for (const auto& [key, v] : t) {
      const std::string k(key.str());
      if (test_keys().count(k) || (test && k == "name")) {
        m[k] = &v;
      } else if (!test) {
        c.fail(&v, k, "unknown setting (the names of 'fabperf run' options, e.g. time, buffsize, threads)");
      } else {
        c.fail(&v, k,
               "unknown test field (name, pattern, hosts, clients, servers, pairs, concurrent-pairs, k, target, "
               "per-link, bind-dev, kpis, or a 'fabperf run' option such as time, buffsize, threads)");
      }
    }
  };
  Merged defaults;
  if (const auto* d = root.get("defaults")) merge_keys(c.table(*d, "defaults"), defaults, false);

  const auto* tests = root.get("tests");
  if (!tests) c.fail(nullptr, "tests", "missing (give one or more [[tests]] tables)");
  const auto* tarr = tests->as_array();
  if (!tarr || tarr->empty()) c.fail(tests, "tests", "expected one or more [[tests]] tables");
  for (const auto& tn : *tarr) {
    const auto& t = c.table(tn, "tests");
    Merged m = defaults;
    merge_keys(t, m, true);
    PlanTest pt;
    pt.name = c.name(tn, "test", " /", "spaces or '/'", plan.tests);
    parse_test_pattern(c, tn, t, m, plan, pt);

    // Spec: every setting of the table, merged over the defaults, with the command line's parsers
    // and limits (core/settings.cpp). Settings that only make sense together (warmup + cooldown <
    // time, ...) or for another transport fail at the test.
    SpecParams p;
    for (const auto& st : spec_settings()) {
      if (const auto* n = m.get(st.name)) c.apply_setting(st, *n, p);
    }
    pt.spec = c.wrap(&tn, "", [&] {
      refuse_inapplicable(p);
      return TestSpec::make(p);
    });
    if (const auto* n = m.get("interval")) pt.interval = run_setting(c, *n, "interval").interval;
    // KPIs: the defaults' table, then the test's own thresholds over it.
    if (const auto* n = defaults.get("kpis")) pt.kpis = parse_kpis(c, c.table(*n, "kpis"));
    if (const auto* n = t.get("kpis")) pt.kpis = merge(pt.kpis, parse_kpis(c, c.table(*n, "kpis")));

    const std::size_t n_links = plan.hosts.front().hp.links.size();
    if (const auto* n = m.get("per-link")) pt.per_link_sequential = run_setting(c, *n, "per-link").per_link_sequential;
    if (const auto* n = m.get("bind-dev"))
      pt.bind_devs = c.wrap(n, "bind-dev", [&] { return parse_bind_devs(c.str(*n, "bind-dev"), n_links); });
    c.wrap(m.get("per-link") ? m.get("per-link") : &tn, "per-link", [&] { normalize(plan, pt); });
    plan.tests.push_back(std::move(pt));
  }
  if (const auto* n = root.get("kpis")) plan.kpis = parse_kpis(c, c.table(*n, "kpis"));
  return plan;
}

void normalize(const Plan& p, PlanTest& t) {
  const Pattern pat = t.pattern.pattern;
  std::vector<std::string> hn;  // by the test's own index
  for (const auto i : t.hosts) hn.push_back(p.hosts[i].name);
  json tj = {{"name", t.name}, {"pattern", std::string(to_string(pat))}, {"hosts", hn}};
  if (pat == Pattern::bipartite) {
    for (const auto& [key, v] : {std::pair{"clients", &t.pattern.clients}, std::pair{"servers", &t.pattern.servers}}) {
      tj[key] = json::array();
      for (const auto i : *v) tj[key].push_back(hn[i]);
    }
  }
  if (pat == Pattern::pairs) {
    tj["pairs"] = json::array();
    for (const auto& f : t.pattern.pairs) tj["pairs"].push_back(hn[f.client] + "->" + hn[f.server]);
  }
  if (pat == Pattern::all_pairs) tj["concurrent-pairs"] = t.pattern.concurrent_pairs;
  if (pat == Pattern::ring) tj["k"] = t.pattern.k;
  if (pat == Pattern::incast || pat == Pattern::broadcast) tj["target"] = hn[t.pattern.target];
  tj["settings"] = to_json(t.spec);
  tj["interval_s"] = std::chrono::duration<double>(t.interval).count();
  tj["kpis"] = to_json(t.kpis);
  // Only when set, so that results files of tests without them stay as they were (--resume).
  const std::size_t links = t.per_link_sequential ? p.hosts[t.hosts.front()].hp.links.size() : 1;
  if (t.per_link_sequential) {
    const auto odd = std::ranges::find_if(t.hosts, [&](auto i) { return p.hosts[i].hp.links.size() != links; });
    if (odd != t.hosts.end() || links < 2) {
      const auto& h = p.hosts[links < 2 ? t.hosts.front() : *odd];
      throw UsageError(
          fmt::format("per-link sequential: needs hosts with the same number of links, two or more "
                      "(NAME@ADDR+ADDR...); {} has {}",
                      h.name, h.hp.links.size()));
    }
    tj["per-link"] = "sequential";
  }
  if (!t.bind_devs.empty()) tj["bind-dev"] = t.bind_devs;
  tj["steps"] = make_steps(t.hosts.size(), t.pattern).size() * links;
  t.normalized = std::move(tj);
}

Plan load_plan(const std::string& path) {
  return parse_plan(read_text_file(path, "plan"), path);
}

std::map<std::string, std::string> node_names(const Plan& p) {
  std::map<std::string, std::string> m;
  for (const auto& h : p.hosts) m[h.hp.str()] = h.name;
  return m;
}

std::string label_of(const std::map<std::string, std::string>& names, const std::string& node) {
  const auto it = names.find(node);
  return it == names.end() ? node : it->second;
}

json plan_json(const Plan& p) {
  json hosts = json::array();
  for (const auto& h : p.hosts) {
    json roles = json::array();
    if (h.client) roles.push_back("client");
    if (h.server) roles.push_back("server");
    hosts.push_back({{"name", h.name}, {"address", h.hp.str()}, {"links", h.hp.links}, {"roles", roles}});
  }
  json tests = json::array();
  for (const auto& t : p.tests) tests.push_back(t.normalized);
  json j = {{"name", p.name}, {"hosts", hosts}, {"tests", tests}, {"kpis", to_json(p.kpis)}};
  // Only when set, so that results files of plans without them stay as they were (--resume).
  if (p.repeat != 1) j["repeat"] = p.repeat;
  if (p.isolate) j["isolate"] = true;
  if (p.ab) {
    j["ab"] = {{"a", p.ab->a},
               {"b", p.ab->b},
               {"a_name", p.ab->a_name},
               {"b_name", p.ab->b_name},
               {"hook_timeout_s", p.ab->timeout_s}};
    if (!p.ab->expect.empty()) j["ab"]["expect"] = p.ab->expect;
    if (!p.ab->expect_rest.empty()) j["ab"]["expect_rest"] = p.ab->expect_rest;
    if (!p.ab->expect_gain.empty()) j["ab"]["expect_gain"] = p.ab->expect_gain;
  }
  return j;
}

std::vector<PlannedStep> expand(const Plan& p) {
  // One pass of every test's steps, for one trial of one configuration.
  const auto pass = [&](std::vector<PlannedStep>& out, std::size_t ti, std::uint32_t trial, const std::string& config,
                        std::size_t block) {
    const auto& t = p.tests[ti];
    const auto steps = make_steps(t.hosts.size(), t.pattern);
    const std::size_t links = t.per_link_sequential ? p.hosts[t.hosts.front()].hp.links.size() : 1;
    for (std::size_t sk = 0; sk < steps.size() * links; ++sk) {
      const std::size_t k = sk / links;
      PlannedStep ps;
      ps.index = out.size();
      ps.base_id = fmt::format("{}/{}", t.name, k);
      if (t.per_link_sequential) {
        ps.link = static_cast<std::uint32_t>(sk % links);
        ps.base_id += fmt::format("/link{}", *ps.link);
      }
      ps.id = !config.empty() ? fmt::format("{}@{}{}", ps.base_id, config, trial)
              : p.repeat > 1  ? fmt::format("{}#{}", ps.base_id, trial)
                              : ps.base_id;
      ps.trial = trial;
      ps.config = config;
      ps.block = block;
      ps.test = ti;
      for (const auto& f : steps[k].flows)
        ps.pairs.emplace_back(slot_of(ps.clients, t.hosts[f.client]), slot_of(ps.servers, t.hosts[f.server]));
      out.push_back(std::move(ps));
    }
  };
  std::vector<PlannedStep> out;
  if (p.ab) {
    // A B A B ...: every test's steps after each hook, so drift over the session hits both alike.
    std::size_t block = 0;
    for (std::uint32_t r = 1; r <= p.repeat; ++r) {
      for (const char* config : {"A", "B"}) {
        for (std::size_t ti = 0; ti < p.tests.size(); ++ti) pass(out, ti, r, config, block);
        ++block;
      }
    }
    return out;
  }
  for (std::size_t ti = 0; ti < p.tests.size(); ++ti) {
    for (std::uint32_t r = 1; r <= p.repeat; ++r) pass(out, ti, r, "", 0);
  }
  return out;
}

std::string flow_names(const Plan& p, const PlannedStep& s) {
  std::vector<std::string> flows;
  for (const auto& [c, v] : s.pairs) flows.push_back(p.hosts[s.clients[c]].name + "->" + p.hosts[s.servers[v]].name);
  return fmt::format("{}", fmt::join(flows, " "));
}

double estimate_seconds(const Plan& p, const std::vector<PlannedStep>& steps) {
  double s = 0;
  for (const auto& st : steps)
    s += std::chrono::duration<double>(p.tests[st.test].spec.time()).count() + kStepOverheadS;
  return s;
}

std::string describe_plan(const Plan& p, const std::vector<PlannedStep>& steps) {
  const auto dur = [](double s) {
    if (s < 120) return fmt::format("{:.1f} s", s);
    if (s < 7200) return fmt::format("{:.1f} min", s / 60);
    return fmt::format("{:.2f} h", s / 3600);
  };
  std::string out = fmt::format("plan '{}' ({}): {} hosts, {} tests, {} steps, about {}\n", p.name, p.file,
                                p.hosts.size(), p.tests.size(), steps.size(), dur(estimate_seconds(p, steps)));
  if (p.ab) {
    out += fmt::format(
        "A/B: {} rounds of A ({}) then B ({}); hooks run on this host (needs --allow-hooks), each within {} s:\n"
        "  A: {}\n  B: {}\n",
        p.repeat, p.ab->a_name, p.ab->b_name, p.ab->timeout_s, p.ab->a, p.ab->b);
    std::string e;
    for (const auto& l : p.ab->expect) e += " --expect " + l;
    if (!p.ab->expect_rest.empty()) e += " --expect-rest " + p.ab->expect_rest;
    if (!p.ab->expect_gain.empty()) e += " --expect-gain " + p.ab->expect_gain;
    if (!e.empty())
      out += fmt::format("{} against {}, judged at the end as by compare{}\n", p.ab->b_name, p.ab->a_name, e);
  } else if (p.repeat > 1) {
    out += fmt::format("repeat: {} trials of every step\n", p.repeat);
  }
  if (p.isolate) out += "isolate: a failing test's suspects are retested against good nodes\n";
  out += "hosts:\n";
  for (const auto& h : p.hosts) {
    const std::string links = h.hp.links.empty() ? "" : fmt::format(" links {}", fmt::join(h.hp.links, "+"));
    const char* roles = h.client && h.server ? "client, server" : h.client ? "client" : "server";
    out += fmt::format("  {:<12} {}{} ({})\n", h.name, h.hp.str(), links, roles);
  }
  for (std::size_t ti = 0; ti < p.tests.size(); ++ti) {
    const auto& t = p.tests[ti];
    std::vector<PlannedStep> mine;
    std::ranges::copy_if(steps, std::back_inserter(mine), [&](const PlannedStep& s) { return s.test == ti; });
    const std::size_t n = mine.size();
    const double secs = std::chrono::duration<double>(t.spec.time()).count();
    out += fmt::format("test '{}': pattern {}, {} {} over {}, time {} s, {} steps, about {}\n", t.name,
                       to_string(t.pattern.pattern), to_string(t.spec.test()), to_string(t.spec.mode()),
                       to_string(t.spec.transport()), secs, n, dur(estimate_seconds(p, mine)));
    out += fmt::format("  settings: buffsize {} socksize {} threads {} parallel {} warmup {} s cooldown {} s\n",
                       format_size(t.spec.buffsize()), format_size(t.spec.socksize()), t.spec.threads(),
                       t.spec.parallel(), std::chrono::duration<double>(t.spec.warmup()).count(),
                       std::chrono::duration<double>(t.spec.cooldown()).count());
    const auto kp = to_json(t.kpis);
    std::vector<std::string> ks;
    for (const auto& [k, v] : kp.items()) ks.push_back(k + " " + v.dump());
    if (!ks.empty()) out += fmt::format("  KPIs: {}\n", fmt::join(ks, ", "));
    // Long tests: the first eight steps and the last one.
    for (std::size_t k = 1; k <= n; ++k) {
      const auto& s = mine[k - 1];
      if (n > 10 && k > 8 && k < n) {
        if (k == 9) out += fmt::format("  ... {} more steps\n", n - 9);
        continue;
      }
      out += fmt::format("  step {:>3} {:<16} {}\n", s.index, s.id, flow_names(p, s));
    }
  }
  const auto kp = to_json(p.kpis);
  if (!kp.empty()) out += "plan-wide KPIs: " + kp.dump() + "\n";
  return out;
}

}  // namespace fabperf::plan
