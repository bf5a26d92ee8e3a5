#include "cli/options.hpp"

#include <fabperf/core/stop.hpp>

#include <algorithm>
#include <sstream>

namespace fabperf::cli {
namespace {

std::vector<std::string> words(const std::string& text, const char* what) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  if (out.empty()) throw UsageError(fmt::format("{}: empty", what));
  return out;
}

std::vector<std::string> names(const std::string& text, const char* what) {
  std::vector<std::string> out;
  for (auto& item : split_list(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{} '{}': empty node name in the list", what, text));
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw UsageError(fmt::format("{}: {} is listed twice", what, item));
    out.push_back(std::move(item));
  }
  return out;
}

// --servers then --clients (none in both, as `key` tells); n_servers: how many serve.
template <typename Read, typename Key>
auto servers_then_clients(const cxxopts::ParseResult& r, Read read, Key key, const char* noun, std::size_t& n_servers) {
  auto all = read(get<std::string>(r, "servers"), "--servers");
  const auto clients = read(get<std::string>(r, "clients"), "--clients");
  for (const auto& c : clients) {
    if (std::ranges::any_of(all, [&](const auto& s) { return key(s) == key(c); }))
      throw UsageError(
          fmt::format("--clients: {} is also a server (a {} is either a client or a server)", key(c), noun));
  }
  n_servers = all.size();
  all.insert(all.end(), clients.begin(), clients.end());
  return all;
}

}  // namespace

void add_launch_options(cxxopts::Options& o) {
  o.add_options("launch")(
      "launch", "start the agents first: ssh (on every --servers/--clients host) or slurm (inside an allocation)",
      cxxopts::value<std::string>())("ssh-command", "ssh program and leading arguments (split on spaces)",
                                     cxxopts::value<std::string>()->default_value("ssh"))(
      "ssh-option", "one more argument for ssh (may repeat), e.g. -p2222 or -oIdentityFile=KEY",
      cxxopts::value<std::vector<std::string>>())(
      "agent-path", "fabperf binary on the agent hosts (ssh default: fabperf from PATH; slurm: this binary)",
      cxxopts::value<std::string>())("agent-port", "port the launched agents listen on (0: each picks a free one)",
                                     cxxopts::value<std::string>()->default_value("0"))(
      "agent-listen", "address the ssh-launched agents listen on (default: the address ssh reached)",
      cxxopts::value<std::string>())("launch-fanout", "ssh sessions set up at once",
                                     cxxopts::value<std::string>()->default_value("32"))(
      "launch-timeout", "seconds per host (ssh) or for the whole srun step until the agents are ready",
      cxxopts::value<std::string>()->default_value("30"));
}

std::unique_ptr<launch::Agents> start_launch(const cxxopts::ParseResult& r, RunRequest& req) {
  if (!r.count("launch")) return nullptr;
  const std::string how = get<std::string>(r, "launch");
  if (how != "ssh" && how != "slurm") throw UsageError(fmt::format("--launch '{}': expected ssh or slurm", how));
  if (r.count("local")) throw UsageError("--launch: cannot be combined with --local");
  if (r.count("key-file")) {
    throw UsageError(
        "--key-file: not used with --launch (the launched agents get a one-time key over the launcher's stdin)");
  }
  const auto port = static_cast<std::uint16_t>(parse_int(get<std::string>(r, "agent-port"), "--agent-port", 0, 65535));
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      parse_duration(get<std::string>(r, "launch-timeout"), "--launch-timeout"));
  if (timeout < std::chrono::seconds(1)) throw UsageError("--launch-timeout: must be at least 1 s");
  std::unique_ptr<launch::Agents> agents;
  std::size_t n_servers = 0;
  stop::mark();
  if (how == "ssh") {
    if (!r.count("servers") || !r.count("clients"))
      throw UsageError("--launch ssh: give --servers and --clients (hosts)");
    launch::SshOptions so;
    so.ssh_command = words(get<std::string>(r, "ssh-command"), "--ssh-command");
    if (r.count("ssh-option")) so.extra = get<std::vector<std::string>>(r, "ssh-option");
    if (r.count("agent-path")) so.agent_path = get<std::string>(r, "agent-path");
    if (so.agent_path.empty()) throw UsageError("--agent-path: empty");
    if (r.count("agent-listen")) so.agent_listen = get<std::string>(r, "agent-listen");
    so.agent_port = port;
    so.fanout = static_cast<std::size_t>(parse_int(get<std::string>(r, "launch-fanout"), "--launch-fanout", 1, 4096));
    so.timeout = timeout;
    const auto host = [](const HostPort& h) { return h.host; };
    agents = launch::start_ssh(servers_then_clients(r, host_list, host, "host", n_servers), so);
  } else {
    for (const char* o : {"ssh-option", "agent-listen"}) {
      if (r.count(o)) throw UsageError(fmt::format("--{}: only for --launch ssh", o));
    }
    launch::SlurmOptions so;
    if (r.count("agent-path")) so.agent_path = get<std::string>(r, "agent-path");
    so.agent_port = port;
    so.timeout = timeout;
    std::vector<std::string> nodes;
    if (r.count("servers") != r.count("clients"))
      throw UsageError("--launch slurm: give both --servers and --clients (node names) or neither");
    if (r.count("servers")) {
      nodes = servers_then_clients(r, names, std::identity{}, "node", n_servers);
    } else {
      // The allocation split like --local: the first half serves.
      nodes = launch::slurm_allocation_nodes();
      if (nodes.size() < 2) throw UsageError("--launch slurm: the allocation has one node; a test needs at least two");
      n_servers = nodes.size() / 2;
    }
    agents = launch::start_slurm(nodes, so);
  }
  assign_endpoints(req, agents->endpoints(), n_servers);
  req.key = agents->key();
  return agents;
}

std::unique_ptr<launch::Agents> start_local_agents(const cxxopts::ParseResult& r, auth::Key& key) {
  const int n = get<int>(r, "local");
  if (n < 2 || n > 64) throw UsageError(fmt::format("--local {}: out of range (2..64)", n));
  auto local = launch::start_local(n, key_file_option(r));
  if (key.empty()) key = local->key();  // their one-time key
  return local;
}

void assign_endpoints(RunRequest& req, const std::vector<HostPort>& eps, std::size_t n_servers) {
  req.servers.assign(eps.begin(), eps.begin() + static_cast<std::ptrdiff_t>(n_servers));
  req.clients.assign(eps.begin() + static_cast<std::ptrdiff_t>(n_servers), eps.end());
}

}  // namespace fabperf::cli
