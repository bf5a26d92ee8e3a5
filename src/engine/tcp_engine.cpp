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
using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;
// Closes the socket on the way out of a failed set-up; release() hands it on.
struct SocketGuard {
  int fd;
  ~SocketGuard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

void set_port(sockaddr* sa, std::uint16_t port) {
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
}

// --bind-dev: one device per link, every one checked before any connection opens.
std::vector<std::string> resolve_bind_devs(const ClientPlan& plan) {
  std::vector<std::string> out;
  if (plan.bind_devs.size() == 1 && plan.bind_devs.front() == "auto") {
    if (plan.source_addrs.empty()) {
      throw UsageError("--bind-dev auto: this client has no link addresses (give it as NAME@ADDR+ADDR)");
    }
    for (const auto& a : plan.source_addrs) {
      std::string dev = interface_of_address(a);
      if (dev.empty()) {
        throw UsageError(fmt::format("--bind-dev auto: no interface of {} owns link address {}", local_hostname(), a));
      }
      out.push_back(std::move(dev));
    }
    return out;
  }
  for (const auto& d : plan.bind_devs) {
    if (::if_nametoindex(d.c_str()) == 0) {
      throw UsageError(fmt::format("--bind-dev {}: no such network interface on {}", d, local_hostname()));
    }
    out.push_back(d);
  }
  return out;
}
}  // namespace

std::uint64_t estimate_buffer_memory(const TestSpec& spec, std::uint64_t flows) {
  return spec.buffsize() + flows * std::min<std::uint64_t>(spec.buffsize(), kRecvChunkLarge);
}

// ---- TcpFlow ------------------------------------------------------------------------------

TcpFlow::TcpFlow(int fd, FlowRole r, FlowOp o, std::uint32_t peer, std::string local_addr, std::string remote_addr)
    : Flow(r, o, peer, std::move(local_addr), std::move(remote_addr)), fd_(fd) {}

TcpFlow::~TcpFlow() {
  if (fd_ >= 0) ::close(fd_);
}

TcpSample TcpFlow::sample_transport() const {
  TcpSample s;
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return s;
  s.valid = true;
  s.total_retrans = ti.tcpi_total_retrans;
  s.rtt_us = ti.tcpi_rtt;
  s.rttvar_us = ti.tcpi_rttvar;
  s.snd_mss = ti.tcpi_snd_mss;
  s.rcv_mss = ti.tcpi_rcv_mss;
  s.pmtu = ti.tcpi_pmtu;
  s.snd_cwnd = ti.tcpi_snd_cwnd;
  return s;
}

void TcpFlow::shutdown_both() noexcept {
  ::shutdown(fd_, SHUT_RDWR);
}

TcpEngine::TcpEngine() = default;

TcpEngine::~TcpEngine() {
  abort();
  join();
  if (tx_memfd_ >= 0) ::close(tx_memfd_);
  if (accept_wake_fd_ >= 0) ::close(accept_wake_fd_);
}

void TcpEngine::stop_accept() noexcept {
  accept_stop_ = true;
  const std::uint64_t one = 1;
  if (accept_wake_fd_ >= 0) (void)!::write(accept_wake_fd_, &one, sizeof one);
}

std::uint16_t TcpEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  // Socket buffer sizes and the congestion control set on the listener are inherited by accepted sockets.
  const auto l =
      net::listen_any_port(plan.bind_address, 4096, "data", [&](int fd) { prepare_socket(fd, ctx, socksize_warned_); });
  listen_fd_ = l.fd;
  const std::uint16_t port = l.port;
  if (accept_wake_fd_ < 0) accept_wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // -1: the 1 s tick ends it
  try {
    accept_thread_ = std::thread([this] { accept_loop(); });
  } catch (const std::system_error& e) {
    // A host out of threads: a typed set-up error, never std::terminate (join() closes the listener).
    throw SystemError("start the data accept thread on", plan.bind_address, e.code().value());
  }
  return port;
}

int TcpEngine::connect_one(const proto::Target& t, FlowOp op, std::uint32_t conn_index, std::uint32_t pair_conn,
                           const ClientPlan& plan) {
  RunContext& ctx = *ctx_;
  // Per-link pinning: the pair's connection c uses link c mod L on both ends.
  const std::string& host = t.link_hosts.empty() ? t.host : t.link_hosts[pair_conn % t.link_hosts.size()];
  const std::string source = plan.source_addrs.empty() ? "" : plan.source_addrs[pair_conn % plan.source_addrs.size()];
  const std::string where =
      host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, t.port) : fmt::format("{}:{}", host, t.port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(t.port);
  const int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) throw SystemError("resolve data address", where, gai_strerror(gai));
  const AddrInfoPtr res_owner(res, freeaddrinfo);
  SocketGuard sock{::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  const int fd = sock.fd;
  if (fd < 0) throw SystemError("socket for", where, errno);
  if (!bind_devs_.empty()) {
    const std::string& dev = bind_devs_[pair_conn % bind_devs_.size()];
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(), static_cast<socklen_t>(dev.size())) != 0) {
      if (errno == EPERM) {
        throw SystemError("--bind-dev", dev,
                          "SO_BINDTODEVICE needs CAP_NET_RAW here: run the agent as root or grant it cap_net_raw");
      }
      throw SystemError("--bind-dev: bind data connection to device", dev, errno);
    }
  }
  std::string bind_addr = source;
  std::optional<std::uint16_t> bind_port;
  sockaddr_storage dst{};
  std::memcpy(&dst, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof dst));
  if (ctx.spec().spread_ports() && op != FlowOp::probe) {
    // The kernel's choice of source address, asked without sending anything (UDP connect).
    std::string src_ip = source;
    if (src_ip.empty()) {
      const int u = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (u >= 0 && ::connect(u, res->ai_addr, res->ai_addrlen) == 0 &&
          getsockname(u, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        src_ip = numeric_host(ss);
      }
      if (u >= 0) ::close(u);
    }
    if (!src_ip.empty()) {
      bind_addr = src_ip;
      bind_port = spread_port(src_ip, numeric_host(dst), t.port, 0);
    }
  }
  if (!bind_addr.empty()) {
    addrinfo sh{};
    sh.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
    sh.ai_family = res->ai_family;
    sh.ai_socktype = SOCK_STREAM;
    addrinfo* src = nullptr;
    const int g2 = getaddrinfo(bind_addr.c_str(), "0", &sh, &src);
    const AddrInfoPtr src_owner(src, freeaddrinfo);
    int b = -1;
    int e = 0;
    if (g2 == 0) {
      if (bind_port) {
        // A chosen port may be in use (or in TIME_WAIT from an earlier test): take the next one
        // that lands on the same member.
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        for (int attempt = 0; attempt < 64 && bind_port; ++attempt) {
          set_port(src->ai_addr, *bind_port);
          b = ::bind(fd, src->ai_addr, src->ai_addrlen);
          e = errno;
          if (b == 0 || e != EADDRINUSE) break;
          spread_port_taken(bind_addr, *bind_port);
          bind_port = spread_port(bind_addr, numeric_host(dst), t.port, attempt + 1);
        }
      }
      if (!bind_port) {
        b = ::bind(fd, src->ai_addr, src->ai_addrlen);
        e = errno;
      }
    }
    if (g2 != 0 || b != 0) {
      throw SystemError(bind_port ? "bind data connection to spread port on" : "bind data connection to link address",
                        bind_port ? fmt::format("{}:{}", bind_addr, *bind_port) : bind_addr,
                        g2 != 0 ? std::string(gai_strerror(g2)) : errno_text(e));
    }
  }
  prepare_socket(fd, ctx, socksize_warned_);
  // Delay pings and rpc requests are small messages that must not wait for Nagle.
  if (ctx.spec().mode() == Mode::rpc || op == FlowOp::probe) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
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
  return open_data_connection(sock.release(), where, t, op, conn_index, plan);
}

void TcpEngine::prepare_client(RunContext& ctx, const ClientPlan& plan) {
  // An agent that serves and loads in one test set ctx_ in prepare_server, and its accept thread
  // reads it from then on: writing it again, even the same value, would race with that read.
  if (ctx_ != &ctx) ctx_ = &ctx;
  bind_devs_ = resolve_bind_devs(plan);
  const TestSpec& spec = ctx.spec();
  const std::uint32_t per_pair = spec.connections_per_pair();
  // A connected socket, as a client flow of this engine.
  auto add_client_flow = [&](int fd, FlowOp op, std::uint32_t node, std::string device) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    auto flow = std::make_unique<TcpFlow>(fd, FlowRole::client, op, node, local_text(fd), sockaddr_text(ss));
    flow->device = std::move(device);
    auto* raw = flow.get();
    ctx.add_flow(std::move(flow));
    std::lock_guard lk(mu_);
    client_flows_.push_back(raw);
    return raw;
  };
  std::uint32_t conn_index = 0;
  for (const auto& t : plan.targets) {
    std::vector<RpcConn*> row;
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      const FlowOp op = spec.mode() != Mode::stream ? FlowOp::rpc : pair_writes(spec, c) ? FlowOp::write : FlowOp::read;
      TcpFlow* flow = add_client_flow(connect_one(t, op, conn_index++, c, plan), op, t.node_index,
                                      bind_devs_.empty() ? "" : bind_devs_[c % bind_devs_.size()]);
      if (spec.mode() == Mode::rpc) {
        std::lock_guard lk(mu_);
        rpc_conns_.push_back(std::make_unique<RpcConn>(flow));
        row.push_back(rpc_conns_.back().get());
      }
    }
    if (spec.mode() == Mode::rpc) rpc_table_.push_back(std::move(row));
    // One more connection per server for delay pings; it carries no test data.
    if (spec.delay_probe().count() == 0) continue;
    TcpFlow* probe =
        add_client_flow(connect_one(t, FlowOp::probe, conn_index++, 0, plan), FlowOp::probe, t.node_index, "");
    std::lock_guard lk(mu_);
    probe_flows_.push_back(probe);
  }
  if (spec.mode() == Mode::rpc) {
    for (std::uint32_t t = 0; t < spec.threads(); ++t) tester_hist_.push_back(&ctx.add_histogram());
  }
  // Bond sanity before the test: what the flows leave on, and how many peers each bond talks to.
  std::map<std::string, std::set<std::string>> bond_peers;
  std::map<std::string, bool> is_bond;
  std::map<std::string, std::string> iface_of;  // by local address without the port
  for (const auto* f : client_flows_) {
    const std::string& iface = cached_interface(iface_of, f->local);
    auto it = is_bond.find(iface);
    if (it == is_bond.end()) it = is_bond.emplace(iface, read_bond(iface).has_value()).first;
    if (it->second) bond_peers[iface].insert(f->remote.substr(0, f->remote.rfind(':')));
  }
  for (const auto& [iface, peers] : bond_peers) {
    if (const auto b = read_bond(iface)) {
      for (const auto& w : bond_findings(*b, static_cast<int>(peers.size()))) ctx.warn(w);
    }
  }
}

void TcpEngine::seal(RunContext& ctx) {
  ctx_ = &ctx;
  // The accept loop finishes the connection in hand (ack sent, flow registered) before it exits.
  stop_accept();
  if (accept_thread_.joinable()) accept_thread_.join();
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
  if ((spec.send_method() == SendMethod::sendfile || tcp_auto) && tx_memfd_ < 0) {
    // One period of tx_buf_'s pattern, so receivers verify sendfile data exactly as written data.
    const int mfd = ::memfd_create("fabperf-tx", MFD_CLOEXEC);
    if (mfd < 0) throw SystemError("--send-method sendfile: memfd_create", "fabperf-tx", errno);
    const std::string_view period(reinterpret_cast<const char*>(tx_buf_.data()), tx_period_);
    if (const int e = write_all(mfd, period); e != 0) {
      ::close(mfd);
      throw SystemError("--send-method sendfile: fill memfd", "fabperf-tx", e);
    }
    tx_memfd_ = mfd;
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

// One thread per stream connection, rpc's servers (rpc_serve_threads), testers (and receivers),
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
  } else if (!rpc_table_.empty()) {
    for (auto& c : rpc_conns_) {
      RpcConn* conn = c.get();
      if (!one_tester_per_connection(spec)) receivers_.emplace_back([this, conn] { rpc_receiver(*conn); });
    }
    for (std::uint32_t t = 0; t < spec.threads(); ++t) {
      testers_.emplace_back([this, t] { rpc_tester(t); });
    }
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
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
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
