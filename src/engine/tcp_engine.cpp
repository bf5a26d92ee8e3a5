// TCP data plane: set-up (listen, connect, hand the connections their flows), start and stop.
// The rest of the engine lives beside it by concern (src/engine/tcp_internal.hpp lists them).
#include "engine/tcp_internal.hpp"
#include "net/listen.hpp"

#include <fabperf/core/bytes.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <system_error>

namespace fabperf {

using namespace tcp;

namespace {
// --bind-dev: one device per link, every one checked before any connection opens.
std::vector<std::string> resolve_bind_devs(const ClientPlan& plan) {
  // auto: the interface that owns each link address.
  const bool automatic = plan.bind_devs.size() == 1 && plan.bind_devs.front() == "auto";
  if (automatic && plan.source_addrs.empty()) {
    throw UsageError("--bind-dev auto: this client has no link addresses (give it as NAME@ADDR+ADDR)");
  }
  std::vector<std::string> out;
  for (const auto& name : automatic ? plan.source_addrs : plan.bind_devs) {
    std::string dev = automatic ? interface_of_address(name) : name;
    if (automatic && dev.empty()) {
      throw UsageError(fmt::format("--bind-dev auto: no interface of {} owns link address {}", local_hostname(), name));
    }
    if (!automatic && ::if_nametoindex(dev.c_str()) == 0) {
      throw UsageError(fmt::format("--bind-dev {}: no such network interface on {}", dev, local_hostname()));
    }
    out.push_back(std::move(dev));
  }
  return out;
}
}  // namespace

// ---- Socket tuning: --socksize, the data-plane options (congestion control, pacing, busy poll,
// not-sent low-water mark, zerocopy) and timeouts. Failures of options become reported warnings
// (the kernel lacks the feature or refuses the value), never silent changes.

namespace tcp {
void set_timeouts(int fd, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void prepare_socket(int fd, RunContext& ctx, std::atomic<bool>& warned) {
  const TestSpec& spec = ctx.spec();
  // Set later, the host's default would have had the connection first: bbr switches on TCP's own
  // pacing (a timer per transmit, firing on any CPU), and switching to cubic leaves it on. On a
  // veth pair that reorders the flow's packets (docs/performance.md, 2026-12-05).
  if (!spec.congestion().empty() && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, spec.congestion().data(),
                                               static_cast<socklen_t>(spec.congestion().size())) != 0) {
    ctx.warn(
        fmt::format("--congestion {}: refused by the kernel ({}; see "
                    "/proc/sys/net/ipv4/tcp_available_congestion_control)",
                    spec.congestion(), errno_text(errno)));
  }
  const auto want = spec.socksize();
  if (want == 0) return;
  // What the kernel granted: it doubles the requested value for bookkeeping, and half of what it
  // reports is usable data.
  auto granted = [fd, v = static_cast<int>(want)](int name) {
    setsockopt(fd, SOL_SOCKET, name, &v, sizeof v);
    int got = 0;
    socklen_t len = sizeof got;
    getsockopt(fd, SOL_SOCKET, name, &got, &len);
    return static_cast<std::uint64_t>(got) / 2;
  };
  const auto snd_got = granted(SO_SNDBUF);
  const auto rcv_got = granted(SO_RCVBUF);
  if ((snd_got < want || rcv_got < want) && !warned.exchange(true)) {
    const SocketLimits limits = read_socket_limits();
    ctx.warn(
        fmt::format("socksize {}: the kernel clamped SO_SNDBUF to {} and SO_RCVBUF to {} (net.core.wmem_max={}, "
                    "net.core.rmem_max={}); raise them with sysctl to get the requested size",
                    format_size(want), format_size(snd_got), format_size(rcv_got), limits.wmem_max, limits.rmem_max));
  }
}

// Applies the test's data-plane tuning to one connection; failures become reported warnings
// (the kernel lacks the feature, or the value is refused), never silent changes.
void tune_socket(int fd, RunContext& ctx) {
  const TestSpec& spec = ctx.spec();
  // An option the test sets (v non-zero); `what` names it in the warning, v filling its {}.
  auto opt = [&](int level, int name, const auto v, fmt::format_string<decltype(v)&> what) {
    if (v == 0 || setsockopt(fd, level, name, &v, sizeof v) == 0) return;
    const int e = errno;
    ctx.warn(fmt::format("{}: refused by the kernel ({})", fmt::format(what, v), errno_text(e)));
  };
  opt(SOL_SOCKET, SO_MAX_PACING_RATE, std::uint64_t{spec.rate()}, "--rate {} B/s");
  opt(SOL_SOCKET, SO_BUSY_POLL, static_cast<int>(spec.busy_poll_us()),
      "--busy-poll {} us (needs CAP_NET_ADMIN above net.core.busy_poll)");
  opt(IPPROTO_TCP, TCP_NOTSENT_LOWAT, static_cast<int>(spec.notsent_lowat()), "--notsent-lowat {}");
  opt(SOL_SOCKET, SO_ZEROCOPY, static_cast<int>(spec.zerocopy()), "--zerocopy (SO_ZEROCOPY)");
}
}  // namespace tcp

std::uint64_t estimate_buffer_memory(const TestSpec& spec, std::uint64_t flows) {
  return spec.buffsize() + flows * std::min<std::uint64_t>(spec.buffsize(), kRecvChunkLarge);
}

TcpEngine::TcpEngine() = default;

TcpEngine::~TcpEngine() {
  abort();
  join();
}

void TcpEngine::stop_accept() noexcept {
  accept_stop_ = true;
  const std::uint64_t one = 1;
  if (accept_wake_fd_.valid()) (void)!::write(accept_wake_fd_.get(), &one, sizeof one);
}

std::uint16_t TcpEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  // Socket buffer sizes and the congestion control set on the listener are inherited by accepted sockets.
  const auto l =
      net::listen_any_port(plan.bind_address, 4096, "data", [&](int fd) { prepare_socket(fd, ctx, socksize_warned_); });
  listen_fd_.reset(l.fd);
  if (!accept_wake_fd_.valid())
    accept_wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));  // -1: the 1 s tick ends it
  try {
    accept_thread_ = std::thread([this] { accept_loop(); });
  } catch (const std::system_error& e) {
    // A host out of threads: a typed set-up error, never std::terminate (join() closes the listener).
    throw SystemError("start the data accept thread on", plan.bind_address, e.code().value());
  }
  return l.port;
}

TcpFlow* TcpEngine::connect_one(const proto::Target& t, FlowOp op, std::uint32_t conn_index, std::uint32_t pair_conn,
                                const ClientPlan& plan) {
  RunContext& ctx = *ctx_;
  // Per-link pinning: the pair's connection c uses link c mod L on both ends.
  const std::string& host = t.link_hosts.empty() ? t.host : t.link_hosts[pair_conn % t.link_hosts.size()];
  const std::string source = plan.source_addrs.empty() ? "" : plan.source_addrs[pair_conn % plan.source_addrs.size()];
  const std::string device = bind_devs_.empty() ? "" : bind_devs_[pair_conn % bind_devs_.size()];
  const std::string where = HostPort{host, t.port, {}}.str();
  const net::Resolved dst = net::resolve(host, t.port, 0, AF_UNSPEC, "resolve data address", where);
  UniqueFd sock(::socket(dst.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const int fd = sock.get();
  if (fd < 0) throw SystemError("socket for", where, errno);
  if (!device.empty() &&
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, device.c_str(), static_cast<socklen_t>(device.size())) != 0) {
    if (errno == EPERM) {
      throw SystemError("--bind-dev", device,
                        "SO_BINDTODEVICE needs CAP_NET_RAW here: run the agent as root or grant it cap_net_raw");
    }
    throw SystemError("--bind-dev: bind data connection to device", device, errno);
  }
  std::string bind_addr = source;
  std::optional<std::uint16_t> bind_port;
  if (ctx.spec().spread_ports() && op != FlowOp::probe) {
    // The kernel's choice of source address, asked without sending anything (UDP connect).
    std::string src_ip = source;
    if (src_ip.empty()) {
      const UniqueFd udp(::socket(dst.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (udp.valid() && ::connect(udp.get(), dst.addr(), dst.len) == 0 &&
          getsockname(udp.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        src_ip = numeric_host(ss);
      }
    }
    if (!src_ip.empty()) {
      bind_addr = src_ip;
      bind_port = spread_port(src_ip, numeric_host(dst.ss), t.port, 0);
    }
  }
  if (!bind_addr.empty()) {
    const auto what = [&] {
      return bind_port ? "bind data connection to spread port on" : "bind data connection to link address";
    };
    const auto object = [&] { return bind_port ? fmt::format("{}:{}", bind_addr, *bind_port) : bind_addr; };
    net::Resolved src = net::resolve(bind_addr, 0, AI_NUMERICHOST | AI_PASSIVE, dst.ss.ss_family, what(), object());
    const int one = 1;
    if (bind_port) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A chosen port may be in use (or in TIME_WAIT from an earlier test): take the next one that
    // lands on the same member.
    for (int attempt = 1;; ++attempt) {
      if (bind_port) net::set_port(src.ss, *bind_port);
      if (::bind(fd, src.addr(), src.len) == 0) break;
      const int e = errno;
      if (!bind_port || e != EADDRINUSE || attempt == 64) throw SystemError(what(), object(), e);
      bind_port = spread_port(bind_addr, numeric_host(dst.ss), t.port, attempt);
    }
  }
  prepare_socket(fd, ctx, socksize_warned_);
  // Delay pings and rpc requests are small messages that must not wait for Nagle.
  if (ctx.spec().mode() == Mode::rpc || op == FlowOp::probe) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rc = ::connect(fd, dst.addr(), dst.len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    rc = ::poll(&pfd, 1, kConnectTimeoutMs);
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (rc == 0) throw SystemError("data connection to", where, "connect timed out after 5 s (firewall?)");
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr != 0) throw SystemError("data connection to", where, soerr);
  } else if (rc != 0) {
    throw SystemError("data connection to", where, errno);
  }
  client_handshake(fd, where, plan.token, plan.test_id,
                   {static_cast<data_hello::Op>(static_cast<int>(op) + 1), ctx.node_index(), t.node_index, conn_index,
                    auth::make_nonce()});
  return add_flow(ctx, sock.release(), FlowRole::client, op, t.node_index, sockaddr_text(dst.ss),
                  op == FlowOp::probe ? "" : device);
}

// --spread-ports: each connection's source port chosen so that the local bond's transmit hash
// puts it on the next member (round-robin over the usable members), with the kernel's own hash
// (sysinfo/bonding). Set-up thread only.
std::optional<std::uint16_t> TcpEngine::spread_port(const std::string& src_ip, const std::string& dst_ip,
                                                    std::uint16_t dst_port, int attempt) {
  auto [it, fresh] = spread_.try_emplace(src_ip);
  Spread& sp = it->second;
  if (fresh) {
    const std::string iface = interface_of_address(src_ip);
    const auto bond = read_bond(iface);
    const auto policy = bond ? parse_hash_policy(bond->hash_policy) : std::nullopt;
    const int members = bond ? static_cast<int>(usable_members(*bond).size()) : 0;
    if (!bond) {
      ctx_->warn(fmt::format("--spread-ports: {} leaves on {}, which is not a bond: ports left to the kernel", src_ip,
                             iface.empty() ? "an unknown interface" : iface));
    } else if (!bond_hashes(*bond) || !policy || !policy_uses_ports(*policy)) {
      ctx_->warn(fmt::format("--spread-ports: bond {} ({}{}) does not choose members by port: ports left to the kernel",
                             bond->name, bond->mode, bond->hash_policy.empty() ? "" : ", " + bond->hash_policy));
    } else if (members < 1) {
      ctx_->warn(fmt::format("--spread-ports: bond {} has no usable member: ports left to the kernel", bond->name));
    } else {
      sp.bond = bond->name;
      sp.policy = *policy;
      sp.members = members;
    }
  }
  if (sp.bond.empty()) return std::nullopt;
  // A retry after EADDRINUSE stays on the member the first attempt aimed at.
  const int member =
      static_cast<int>((attempt == 0 ? sp.next++ : sp.next - 1) % static_cast<std::uint32_t>(sp.members));
  // Below the default ephemeral range (32768-60999), so the kernel's own choices do not collide.
  const auto port = port_for_member(sp.policy, {.src_ip = src_ip, .dst_ip = dst_ip, .dst_port = dst_port}, member,
                                    sp.members, 10000, 32767, sp.taken);
  if (port) sp.taken.push_back(*port);
  return port;
}

TcpFlow* TcpEngine::add_flow(RunContext& ctx, int fd, FlowRole role, FlowOp op, std::uint32_t peer, std::string remote,
                             std::string device) {
  // Back to blocking with a tick, for the data loops.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  set_timeouts(fd, kTickMs);
  auto flow = std::make_unique<TcpFlow>(fd, role, op, peer, local_text(fd), std::move(remote));
  flow->device = std::move(device);
  auto* raw = flow.get();
  ctx.add_flow(std::move(flow));
  std::lock_guard lk(mu_);
  (role == FlowRole::server ? server_flows_ : client_flows_).push_back(raw);
  return raw;
}

void TcpEngine::prepare_client(RunContext& ctx, const ClientPlan& plan) {
  // An agent that serves and loads in one test set ctx_ in prepare_server, and its accept thread
  // reads it from then on: writing it again, even the same value, would race with that read.
  if (ctx_ != &ctx) ctx_ = &ctx;
  bind_devs_ = resolve_bind_devs(plan);
  const TestSpec& spec = ctx.spec();
  std::uint32_t conn_index = 0;
  for (const auto& t : plan.targets) {
    std::vector<RpcConn*> row;
    for (std::uint32_t c = 0; c < spec.connections_per_pair(); ++c) {
      const FlowOp op = spec.mode() != Mode::stream ? FlowOp::rpc : pair_writes(spec, c) ? FlowOp::write : FlowOp::read;
      TcpFlow* flow = connect_one(t, op, conn_index++, c, plan);
      if (spec.mode() == Mode::rpc) row.push_back(rpc_conns_.emplace_back(std::make_unique<RpcConn>(flow)).get());
    }
    if (spec.mode() == Mode::rpc) rpc_table_.push_back(std::move(row));
    // One more connection per server for delay pings; it carries no test data.
    if (spec.delay_probe().count() != 0) probe_flows_.push_back(connect_one(t, FlowOp::probe, conn_index++, 0, plan));
  }
  if (spec.mode() == Mode::rpc) {
    for (std::uint32_t t = 0; t < spec.threads(); ++t) tester_hist_.push_back(&ctx.add_histogram());
  }
  // Bond sanity before the test: what the flows leave on, and how many peers each bond talks to.
  std::map<std::string, std::set<std::string>> peers_of;  // by interface
  std::map<std::string, std::string> iface_of;            // by local address without the port
  for (const auto* f : client_flows_) {
    peers_of[cached_interface(iface_of, f->local)].insert(f->remote.substr(0, f->remote.rfind(':')));
  }
  for (const auto& [iface, peers] : peers_of) {
    if (const auto b = read_bond(iface)) {
      for (const auto& w : bond_findings(*b, static_cast<int>(peers.size()))) ctx.warn(w);
    }
  }
}

void TcpEngine::seal(RunContext& ctx) {
  // The accept loop finishes the connection in hand (ack sent, flow registered) before it exits;
  // ctx_ is written only after, as the loop reads it.
  stop_accept();
  if (accept_thread_.joinable()) accept_thread_.join();
  ctx_ = &ctx;
}

void TcpEngine::start(RunContext& ctx) {
  seal(ctx);
  const TestSpec& spec = ctx.spec();
  const std::size_t block = spec.buffsize();
  // The pattern repeats every tx_period_ bytes (a divisor of the block size), so senders send any
  // block from one period (write from tx_buf_, sendfile from a memfd): the source stays cache-hot
  // like iperf's single buffer, whatever --buffsize is. Receivers compare against tx_buf_ at the block offset, which
  // holds the same repeating bytes, so --verify is unchanged.
  tx_period_ = block > kPatternPeriod && block % kPatternPeriod == 0 ? kPatternPeriod : block;
  tx_buf_.resize(block);
  fill_pattern(tx_buf_, tx_period_);
  const bool tcp_auto = spec.send_method() == SendMethod::automatic;
  if ((spec.send_method() == SendMethod::sendfile || tcp_auto) && !tx_memfd_.valid()) {
    // One period of tx_buf_'s pattern, so receivers verify sendfile data exactly as written data.
    UniqueFd mfd(::memfd_create("fabperf-tx", MFD_CLOEXEC));
    if (!mfd.valid()) throw SystemError("--send-method sendfile: memfd_create", "fabperf-tx", errno);
    const std::string_view period(reinterpret_cast<const char*>(tx_buf_.data()), tx_period_);
    if (const int e = write_all(mfd.get(), period); e != 0)
      throw SystemError("--send-method sendfile: fill memfd", "fabperf-tx", e);
    tx_memfd_ = std::move(mfd);
  }
  // The warm-up hosts the trials, one after the other so that each compares its candidates with
  // the other choice held still: the send method first (after one settle slice: slow start),
  // then the receive chunk; a trial alone gets the whole warm-up.
  const bool recv_choice = spec.transport() == Transport::tcp && spec.buffsize() > kRecvChunkSmall;
  if (!send_trial_ && !recv_trial_) {
    const Schedule& sch = ctx.schedule();
    const std::int64_t mid =
        tcp_auto && recv_choice ? sch.start_at + (sch.window_open - sch.start_at) / 2 : sch.window_open;
    if (tcp_auto) {
      send_trial_ = std::make_unique<ArmTrial>("send method", std::array<std::string, 2>{"write", "sendfile"},
                                               sch.start_at, mid, true);
    }
    if (recv_choice) {
      const auto sizes = recv_chunks(spec);
      recv_trial_ = std::make_unique<ArmTrial>("receive chunk",
                                               std::array<std::string, 2>{format_size(sizes[0]), format_size(sizes[1])},
                                               tcp_auto ? mid : sch.start_at, sch.window_open, !tcp_auto);
    }
  }
  std::lock_guard lk(mu_);
  try {
    spawn_data_threads(ctx);
  } catch (const std::system_error& e) {
    // A host out of threads (or TasksMax reached): a typed error the agent refuses the test with;
    // the threads already running see the abort and are joined as usual (join()).
    throw SystemError("start data threads for", fmt::format("test on node {}", ctx.node_index()), e.code().value());
  }
}

// One thread per stream connection, rpc's servers (rpc_serve_threads), testers (and receivers) or
// pipelines (tcp::pinned_testers),
// plus the delay probe. Under mu_.
void TcpEngine::spawn_data_threads(RunContext& ctx) {
  const TestSpec& spec = ctx.spec();
  auto stream = [&](TcpFlow* f, bool sends) {
    threads_.emplace_back([this, f, sends] { sends ? stream_send(*f) : stream_receive(*f); });
  };
  std::vector<TcpFlow*> served;  // rpc requests and delay pings
  for (TcpFlow* f : server_flows_) {
    if (f->op == FlowOp::rpc || f->op == FlowOp::probe) {
      served.push_back(f);
    } else {
      stream(f, f->op != FlowOp::write);
    }
  }
  std::vector<std::vector<TcpFlow*>> groups(std::min(served.size(), rpc_serve_threads()));
  for (std::size_t i = 0; i < served.size(); ++i) groups[i % groups.size()].push_back(served[i]);
  for (auto& g : groups) threads_.emplace_back([this, g = std::move(g)] { rpc_server(g); });
  if (!probe_flows_.empty()) {
    ctx.mark_delay();
    threads_.emplace_back([this] { probe_loop(); });
  }
  if (spec.mode() == Mode::stream) {
    for (TcpFlow* f : client_flows_) {
      if (f->op != FlowOp::probe) stream(f, f->op == FlowOp::write);
    }
  } else if (const auto pinned = pinned_testers(spec, rpc_table_.size()); !pinned.empty()) {
    for (std::size_t s = 0; s < pinned.size(); ++s) {
      for (std::size_t lane = 0; lane < pinned[s].size(); ++lane) {
        if (pinned[s][lane].empty()) continue;
        testers_.emplace_back([this, c = rpc_table_[s][lane], ts = pinned[s][lane]] { rpc_pipeline(*c, ts); });
      }
    }
  } else if (!rpc_table_.empty()) {
    if (!one_tester_per_connection(spec)) {
      for (auto& c : rpc_conns_) receivers_.emplace_back([this, conn = c.get()] { rpc_receiver(*conn); });
    }
    for (std::uint32_t t = 0; t < spec.threads(); ++t) testers_.emplace_back([this, t] { rpc_tester(t); });
  }
}

void TcpEngine::abort() noexcept {
  stop_accept();
  std::lock_guard lk(mu_);
  for (TcpFlow* f : server_flows_) f->shutdown_both();
  for (TcpFlow* f : client_flows_) f->shutdown_both();
}

void TcpEngine::join() {
  stop_accept();
  if (accept_thread_.joinable()) accept_thread_.join();
  join_all(testers_);
  // All testers are done: tell each server no more requests will come, then wait for the replies
  // still in flight and the server's close.
  for (auto& c : rpc_conns_) ::shutdown(c->flow->fd(), SHUT_WR);
  join_all(receivers_);
  join_all(threads_);
  listen_fd_.reset();
}

std::array<std::size_t, 2> TcpEngine::recv_chunks(const TestSpec& spec) {
  const auto block = static_cast<std::size_t>(spec.buffsize());
  return {std::min(block, kRecvChunkSmall), std::min(block, kRecvChunkLarge)};
}

std::vector<TrialResult> TcpEngine::trials() const {
  std::vector<TrialResult> out;
  for (const auto* t : {send_trial_.get(), recv_trial_.get()}) {
    if (t != nullptr && t->used()) out.push_back(t->result());
  }
  return out;
}

}  // namespace fabperf
