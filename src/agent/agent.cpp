#include <fabperf/agent/agent.hpp>
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include "agent/test_host.hpp"
#include "net/listen.hpp"
#include "net/stop_watch.hpp"
#include "proto/conn.hpp"
#include "proto/tls_psk.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <array>
#include <deque>
#include <memory>

namespace fabperf {
namespace {

using namespace std::chrono_literals;
using proto::FramedConn;
using proto::MsgType;

constexpr auto kAgentFrameDeadline = 5s;
// Everything before a peer has proven the key (or, without a key, sent HELLO) must happen within
// this much of accepting it: the TLS handshake, HELLO, all of it. One deadline in total, so a
// stranger that trickles bytes cannot hold a slot longer.
constexpr auto kPreAuthDeadline = 5s;
// Connections that have not proven the key yet are counted apart from authenticated sessions,
// at most this many at once and this many per source address; when either is full the oldest
// such connection gives way to the new one. A stranger can therefore never take an
// authenticated session's place, and an honest coordinator (whose handshake takes milliseconds)
// gets in unless it is outpaced by more new connections than these limits within that time.
constexpr std::size_t kMaxPreAuth = 64;
constexpr std::size_t kMaxPreAuthPerSource = 8;
// The coordinator sends a heartbeat every second; this much silence means it is gone. Short
// enough that traffic stops within 5 s of the coordinator vanishing (a tick of 0.2 s to stop).
constexpr auto kAgentIdleDeadline = 4s;
constexpr auto kHeartbeat = 1s;

// A connection that has not proven the key yet (see kMaxPreAuth).
struct PreAuth {
  std::weak_ptr<FramedConn> conn;
  std::string source;  // the peer's address, without the port
};
class Agent {
 public:
  explicit Agent(const AgentOptions& o)
      : opts_(o),
        acceptor_(io_),
        pool_(2),
        host_(io_, pool_, TestHostLimits{o.max_duration, o.max_buffer_memory, std::nullopt}, &make_engine,
              local_hostname(), [this] {
                if (stopping_) io_.stop();  // the last test is released: nothing keeps the agent
              }) {
    if (!opts_.key.empty()) tls_ = proto::make_tls_context(opts_.key, true);
  }

  int run() {
    error_code aec;
    const auto addr = asio::ip::make_address(opts_.listen_host, aec);
    if (aec) throw UsageError(fmt::format("--listen {}: not a numeric IP address", opts_.listen_host));
    const std::string listen_at = HostPort{opts_.listen_host, opts_.listen_port, {}}.str();
    if (opts_.key.empty() && !opts_.insecure && !addr.is_loopback()) {
      throw UsageError(fmt::format(
          "--listen {}: refusing to accept coordinators from the network without a key: give --key-file FILE "
          "(create one with 'fabperf keygen FILE'), listen on 127.0.0.1, or pass --insecure",
          listen_at));
    }
    Tcp::endpoint ep(addr, opts_.listen_port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(Tcp::acceptor::reuse_address(true));
    if (addr.is_v6()) acceptor_.set_option(asio::ip::v6_only(false));
    error_code ec;
    acceptor_.bind(ep, ec);
    if (ec) throw SystemError("listen on", listen_at, ec.message());
    acceptor_.listen(asio::socket_base::max_listen_connections);
    const auto bound = acceptor_.local_endpoint();
    const std::string where = HostPort{numeric_address(bound.address()), bound.port(), {}}.str();
    spdlog::info("fabperf agent {} listening on {} (pid {}, max test duration {} s, max buffer memory {} MiB)",
                 FABPERF_VERSION, where, getpid(), opts_.max_duration.count(), opts_.max_buffer_memory >> 20);
    if (!opts_.key.empty()) {
      spdlog::info("agent: coordinators must prove the shared key from {} (TLS 1.3, pre-shared key {})",
                   opts_.key_source, tls::derive_control_psk(opts_.key)->identity);
    } else if (opts_.insecure) {
      spdlog::warn("agent: INSECURE: no key; any host that reaches {} can make this agent send traffic", where);
    } else {
      spdlog::warn("agent: no key: accepting coordinators on loopback only (use --key-file to accept remote ones)");
    }
    if (opts_.ready_fd >= 0) {
      const std::string line = fmt::format("LISTENING {}\n", where);
      (void)!::write(opts_.ready_fd, line.data(), line.size());
      ::close(opts_.ready_fd);
    }
    // main() owns SIGINT/SIGTERM (fabperf/core/stop.hpp): a request stops the agent.
    stop_watch_ = std::make_unique<StopWatch>(io_, [this](int sig) { stop(fmt::format("signal {} received", sig)); });
    if (opts_.exit_on_stdin_eof) watch_stdin();
    asio::co_spawn(io_, accept_loop(), asio::detached);
    io_.run();
    pool_.join();
    return 0;
  }

 private:
  // The launcher keeps our stdin open for as long as it wants us; EOF (or an error) means stop.
  void watch_stdin() {
    const int fd = ::dup(0);
    if (fd < 0) throw SystemError("watch", "stdin", errno);
    stdin_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    read_stdin();
  }
  void read_stdin() {
    stdin_->async_read_some(asio::buffer(stdin_buf_), [this](error_code e, std::size_t) {
      if (stopping_) return;
      if (e) return stop("stdin closed (the launcher is gone or asked us to stop)");
      read_stdin();
    });
  }

  void stop(const std::string& why) {
    if (stopping_) return;
    spdlog::info("agent: {}, stopping", why);
    if (stop_watch_) stop_watch_->cancel();
    if (stdin_) stdin_->close();
    stopping_ = true;
    acceptor_.close();
    for (auto& w : sessions_) {
      if (auto c = w.lock()) c->close();
    }
    for (auto& p : preauth_) {
      if (auto c = p.conn.lock()) c->close();
    }
    host_.stop(why);  // once the test's threads are joined, on_idle stops the loop
    if (host_.idle()) io_.stop();
  }

  // Keeps the unauthenticated connections within kMaxPreAuth and kMaxPreAuthPerSource before
  // one more is taken in, closing the oldest of the source or of all (see kMaxPreAuth).
  void make_room_for_stranger(const std::string& source, const std::string& peer) {
    std::erase_if(preauth_, [](const PreAuth& p) {
      auto c = p.conn.lock();
      return !c || !c->is_open();
    });
    const auto from_source = static_cast<std::size_t>(std::ranges::count(preauth_, source, &PreAuth::source));
    auto evict = [&](auto it, const char* why) {
      if (auto c = it->conn.lock()) {
        strangers_log_.warn("agent: closed unauthenticated connection {} to make room for {}: {}", c->peer(), peer,
                            why);
        c->close();
      }
      preauth_.erase(it);
    };
    if (from_source >= kMaxPreAuthPerSource) {
      evict(std::ranges::find(preauth_, source, &PreAuth::source),
            "too many unauthenticated connections from one address");
    } else if (preauth_.size() >= kMaxPreAuth) {
      evict(preauth_.begin(), "too many unauthenticated connections");
    }
  }

  // Moves a connection that proved the key from the strangers to the sessions; false (and the
  // peer is told) when every session slot is taken by authenticated coordinators.
  bool admit(const std::shared_ptr<FramedConn>& conn) {
    std::erase_if(preauth_, [&](const PreAuth& p) {
      auto c = p.conn.lock();
      return !c || c == conn;
    });
    std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
    if (sessions_.size() >= opts_.max_sessions) return false;
    sessions_.push_back(conn);
    return true;
  }

  asio::awaitable<void> accept_loop() {
    while (!stopping_) {
      error_code ec;
      Tcp::socket sock = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopping_) break;
        if (ec.category() == asio::error::get_system_category() && net::accept_out_of_resources(ec.value())) {
          // Out of file descriptors (or memory): accepting again at once would fail again at once.
          // The pending connection waits in the backlog until something is closed.
          strangers_log_.warn("agent: cannot accept control connections: {} (retrying every 100 ms)", ec.message());
          asio::steady_timer t(io_, std::chrono::nanoseconds(net::kAcceptPauseNs));
          co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        continue;
      }
      const auto remote = sock.remote_endpoint(ec);
      const std::string peer = ec ? "?" : HostPort{numeric_address(remote.address()), remote.port(), {}}.str();
      if (opts_.key.empty() && !opts_.insecure && !ec && !unmapped(remote.address()).is_loopback()) {
        spdlog::warn(
            "agent: refused control connection from {}: this agent has no key and accepts loopback "
            "coordinators only (start it with --key-file)",
            peer);
        continue;
      }
      const std::string source = ec ? "?" : numeric_address(remote.address());
      make_room_for_stranger(source, peer);
      auto conn = std::make_shared<FramedConn>(std::move(sock), peer, tls_);
      preauth_.push_back(PreAuth{conn, source});
      asio::co_spawn(io_, session(conn), asio::detached);
    }
  }

  // SHUTDOWN (the shell's kill/killall). Who may stop the agent: any coordinator it accepted
  // when that coordinator proved the key or is on loopback; an --insecure agent refuses remote
  // ones (anybody on the network could stop it), --no-remote-kill refuses all. A test owned by
  // another coordinator is never cut short.
  asio::awaitable<void> on_shutdown(std::shared_ptr<FramedConn> conn, const std::string& who, const proto::Shutdown& m,
                                    bool loopback_peer) {
    std::string refusal;
    if (!opts_.allow_remote_kill) {
      refusal = "this agent was started with --no-remote-kill (stop it through its launcher)";
    } else if (opts_.key.empty() && !loopback_peer) {
      refusal = "this agent has no key: only a coordinator on its own host may stop it (start it with --key-file)";
    } else if (auto other = host_.held_by_other(conn.get())) {
      refusal = "agent busy: " + *other;
    }
    if (!refusal.empty()) {
      send_error(*conn, proto::ErrorCode::refused, "shutdown refused: " + refusal);
      co_return;
    }
    spdlog::warn("agent: coordinator {} asked this agent to exit ({}): stopping", who,
                 m.reason.empty() ? "no reason" : m.reason);
    conn->send(MsgType::bye, nlohmann::json::object());
    co_await conn->flush();
    stop(fmt::format("coordinator {} asked it to exit", who));
  }

  asio::awaitable<void> heartbeats(std::shared_ptr<FramedConn> conn) {
    asio::steady_timer t(io_);
    while (conn->is_open()) {
      t.expires_after(kHeartbeat);
      error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      // Past the test's end and before its RESULT the run drains its connections: the coordinator
      // waits for a RESULT while this says so (CoordinatorTiming::drain_max bounds it there).
      // During a test the bytes received so far feed the coordinator's live progress line.
      if (conn->is_open()) {
        nlohmann::json body = nlohmann::json::object();
        if (host_.draining(conn.get())) body["draining"] = true;
        if (const auto rx = host_.received(conn.get())) body["rx_bytes"] = *rx;
        conn->send(MsgType::heartbeat, body);
      }
    }
  }

  // Refuses the session: tells the peer why (an ERROR frame), logs it, closes.
  asio::awaitable<void> refuse(std::shared_ptr<FramedConn> conn, proto::ErrorCode code, std::string message) {
    send_error(*conn, code, message);
    co_await conn->flush();
    conn->close();
  }

  // Before anything is parsed: a keyed agent wants the TLS 1.3 handshake with the key's PSK (the
  // peer's first byte starts a TLS record), a key-less one wants plain frames. Either mismatch is
  // answered with a plain ERROR frame naming it, then closed. True when the session may go on.
  asio::awaitable<bool> prove_peer(std::shared_ptr<FramedConn> conn) {
    std::uint8_t first = 0;
    error_code ec;
    co_await conn->socket().async_receive(asio::buffer(&first, 1), asio::socket_base::message_peek,
                                          asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !conn->is_open()) co_return false;  // closed, or the pre-auth deadline passed
    const bool tls_hello = first == tls::kHandshakeRecord;
    if (opts_.key.empty() && !tls_hello) co_return true;
    if (opts_.key.empty() || !tls_hello) {
      // A refused peer's first bytes are read (unparsed) before the answer: closing a socket with
      // unread data sends a reset, which can destroy the ERROR frame before the peer reads it.
      std::array<std::uint8_t, 4096> junk{};
      co_await conn->socket().async_read_some(asio::buffer(junk), asio::redirect_error(asio::use_awaitable, ec));
      proto::ErrorMsg answer{
          proto::ErrorCode::key_required,
          "this agent requires the shared key (TLS 1.3 with its pre-shared key); give --key-file FILE"};
      if (tls_hello) {  // and this agent has none
        strangers_log_.warn("agent: refused coordinator {}: it has a key and this agent has none", conn->peer());
        answer = {proto::ErrorCode::no_key, "this agent has no key (start it with --key-file to use one)"};
      } else {
        strangers_log_.warn("agent: authentication failed for {}: the coordinator has no key (it did not start TLS)",
                            conn->peer());
      }
      conn->send(MsgType::error, proto::to_json(answer));
      co_await conn->flush();
      conn->close();
      co_return false;
    }
    try {
      co_await conn->start_tls(kPreAuthDeadline);
    } catch (const std::exception& e) {
      const bool other_key =
          dynamic_cast<const proto::TlsHandshakeError*>(&e) && tls::peer_offered_other_key(conn->ssl());
      strangers_log_.warn("agent: authentication failed for {}: {}", conn->peer(),
                          other_key ? "key mismatch (the coordinator's key is not this agent's)" : e.what());
      co_return false;
    }
    co_return true;
  }

  asio::awaitable<void> session(std::shared_ptr<FramedConn> conn) {
    std::string who = conn->peer();
    std::string protocol_error;
    std::string ended = "closed";  // why the session ended, for a test it owned
    // One deadline for everything before HELLO_OK (kPreAuthDeadline).
    bool admitted = false;
    asio::steady_timer preauth_timer(io_);
    preauth_timer.expires_after(kPreAuthDeadline);
    preauth_timer.async_wait([this, weak = std::weak_ptr<FramedConn>(conn), &admitted](error_code e) {
      if (e || admitted) return;
      if (auto c = weak.lock(); c && c->is_open()) {
        strangers_log_.warn("agent: dropped {}: no authenticated HELLO within {} s of connecting", c->peer(),
                            kPreAuthDeadline.count());
        c->close();
      }
    });
    try {
      if (!co_await prove_peer(conn)) co_return;
      // Nothing large is read or parsed before the peer proved the key.
      auto f = co_await conn->read(kPreAuthDeadline, kAgentFrameDeadline, proto::kMaxPreAuthBody);
      if (f.type != MsgType::hello)
        co_return co_await refuse(conn, proto::ErrorCode::protocol,
                                  fmt::format("expected HELLO, got {}", proto::to_string(f.type)));
      const auto hello = proto::parse_hello(f.body);
      if (hello.proto_min > proto::kVersion || hello.proto_max < proto::kVersion)
        co_return co_await refuse(
            conn, proto::ErrorCode::version,
            fmt::format("protocol version mismatch: coordinator speaks {}..{}, this agent speaks {}", hello.proto_min,
                        hello.proto_max, proto::kVersion));
      admitted = true;
      preauth_timer.cancel();
      if (!admit(conn))
        co_return co_await refuse(conn, proto::ErrorCode::busy,
                                  fmt::format("{} sessions already open", opts_.max_sessions));
      who = fmt::format("{} ({})", hello.coordinator, conn->peer());
      spdlog::info("agent: coordinator {} connected{}", who, opts_.key.empty() ? " (no key)" : ", key verified");
      const std::string bind_address = numeric_address(conn->socket().local_endpoint().address());
      conn->send(MsgType::hello_ok,
                 proto::to_json(proto::HelloOk{proto::kVersion, local_hostname(), FABPERF_VERSION, getpid(),
                                               proto::local_capabilities(), bind_address}));
      asio::co_spawn(io_, heartbeats(conn), asio::detached);

      for (;;) {
        auto fr = co_await conn->read(kAgentIdleDeadline, kAgentFrameDeadline);
        const std::int64_t t_rx = mono_now_ns();
        switch (fr.type) {
          case MsgType::ping:
            conn->send(MsgType::pong,
                       proto::to_json(proto::Pong{proto::parse_ping(fr.body).seq, t_rx, mono_now_ns(), wall_now_ns()}));
            break;
          case MsgType::heartbeat: break;
          case MsgType::links_request: {
            proto::LinksReply reply;
            co_await on_pool(pool_, [&] {
              reply.hostname = local_hostname();
              reply.links = read_links();
              reply.limits = read_socket_limits();
              reply.rdma = read_local_rdma_devices();
            });
            conn->send(MsgType::links, proto::to_json(reply));
            break;
          }
          case MsgType::shutdown:
            co_await on_shutdown(conn, who, proto::parse_shutdown(fr.body),
                                 unmapped(conn->socket().remote_endpoint().address()).is_loopback());
            break;
          case MsgType::setup_server:
            co_await host_.setup_server(conn, who, proto::parse_setup_server(fr.body), bind_address);
            break;
          case MsgType::setup_client: co_await host_.setup_client(conn, who, proto::parse_setup_client(fr.body)); break;
          case MsgType::rdma_connect: co_await host_.rdma_connect(conn, proto::parse_rdma_connect(fr.body)); break;
          case MsgType::start: co_await host_.start(conn, proto::parse_start(fr.body)); break;
          case MsgType::abort: host_.abort(conn.get(), proto::parse_abort(fr.body).reason); break;
          case MsgType::bye:
            co_await conn->flush();
            conn->close();
            break;
          case MsgType::error:  // e.g. a coordinator with a key that refuses this key-less agent
            spdlog::warn("agent: coordinator {} gave up on this agent: {}", who, proto::parse_error(fr.body).message);
            conn->close();
            break;
          default:
            send_error(*conn, proto::ErrorCode::protocol,
                       fmt::format("unexpected {} from a coordinator", proto::to_string(fr.type)));
            break;
        }
        if (!conn->is_open()) break;
      }
    } catch (const ProtocolError& e) {
      protocol_error = e.what();
    } catch (const std::exception& e) {
      ended = e.what();
      if (!admitted) {
        strangers_log_.warn("agent: unauthenticated session {} ended: {}", who, e.what());
      } else if (!host_.owned_by(conn.get()) && !stopping_) {
        spdlog::info("agent: session {} ended: {}", who, e.what());  // the test's owner: warned below
      }
    }
    if (!protocol_error.empty()) {
      // A peer that breaks the protocol is told why, then dropped.
      if (admitted) {
        spdlog::warn("agent: session {}: {}", who, protocol_error);
      } else {
        strangers_log_.warn("agent: session {}: {}", who, protocol_error);
      }
      if (conn->is_open()) co_await refuse(conn, proto::ErrorCode::protocol, protocol_error);
    }
    conn->close();
    host_.session_ended(conn.get(), who, protocol_error.empty() ? ended : protocol_error);
  }

  AgentOptions opts_;
  asio::io_context io_;
  Tcp::acceptor acceptor_;
  std::unique_ptr<StopWatch> stop_watch_;
  std::unique_ptr<asio::posix::stream_descriptor> stdin_;
  std::array<char, 256> stdin_buf_{};
  asio::thread_pool pool_;
  std::shared_ptr<asio::ssl::context> tls_;          // with a key: every control connection runs TLS
  std::vector<std::weak_ptr<FramedConn>> sessions_;  // authenticated (HELLO_OK sent)
  std::deque<PreAuth> preauth_;                      // not yet: oldest first
  net::RateLimitedLog strangers_log_{"unauthenticated connections"};
  TestHost host_;  // after io_ and pool_, which it uses
  bool stopping_{false};
};

}  // namespace

int run_agent(const AgentOptions& options) {
  raise_fd_limit();
  if (options.max_buffer_memory < (16u << 20)) throw UsageError("--max-buffer-memory: must be at least 16M");
  // OpenSSL sets up its provider, random generator and HMAC on first use: 3-5 ms of CPU that
  // would otherwise land in the first test's data handshakes (docs/performance.md, bench-scale).
  (void)auth::make_nonce();
  (void)auth::hmac_sha256(std::span<const std::uint8_t>(), {});
  Agent agent(options);
  return agent.run();
}

}  // namespace fabperf
