// The TCP data connections' opening on both ends: the three-pass mutual challenge-response of
// include/fabperf/engine/data_hello.hpp, driven over sockets. The server side runs every pending
// connection's exchange concurrently on the accept thread; the client side is blocking and
// bounded (set-up only). Neither end sends or accepts test data before the other proved the key:
// a client returns its socket only after the server's proof verified and its own was accepted;
// a server registers a flow only after the client's proof verified.
#include "engine/tcp_internal.hpp"
#include "net/listen.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/engine/data_hello.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <unordered_set>

namespace fabperf {
namespace {

using namespace tcp;
namespace dh = data_hello;

// Data connections accepted and still in their handshake at one time (accept_loop), in all and
// from one remote address. A client agent opens its connections one after another, so a real
// source holds one or two; past the bound a source's oldest gives way, and a flood from one
// address cannot hold the port. Loopback is exempt: a local peer has all of 127/8 to choose
// from, and one host may run hundreds of agents there (bench-scale).
constexpr std::size_t kMaxPendingHandshakes = 256;
constexpr std::size_t kMaxPendingPerSource = 16;

// The hello's operation codes are FlowOp's values plus one (decode_hello refuses any other).
static_assert(static_cast<int>(dh::Op::write) == static_cast<int>(FlowOp::write) + 1 &&
              static_cast<int>(dh::Op::read) == static_cast<int>(FlowOp::read) + 1 &&
              static_cast<int>(dh::Op::rpc) == static_cast<int>(FlowOp::rpc) + 1 &&
              static_cast<int>(dh::Op::probe) == static_cast<int>(FlowOp::probe) + 1);

// One accepted data connection in its handshake.
struct Pending {
  UniqueFd fd;
  std::string remote;
  std::string source;           // the address alone; empty for loopback (not limited)
  std::int64_t deadline_ns{0};  // for the whole exchange, from accept
  bool challenged{false};       // the HELLO was answered; now reading the PROOF
  std::size_t got{0};
  std::array<std::uint8_t, dh::kHelloSize> buf{};  // the HELLO, then the PROOF (smaller)
  dh::Hello hello{};
  auth::Nonce server_nonce{};
  proto::Token key{};
};

// A fresh connection's send buffer is empty: these small answers never wait.
template <std::size_t N>
bool send_now(int fd, const std::array<std::uint8_t, N>& b) {
  return ::send(fd, b.data(), N, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(N);
}

std::string who(const Pending& p) {
  return p.challenged
             ? fmt::format("{} (client node {}, connection {})", p.remote, p.hello.client_node, p.hello.conn_index)
             : p.remote;
}

// The server's side of the exchanges in flight: the checks of each message and the bookkeeping of
// the connections taken (single-threaded, on the accept thread).
class Handshakes {
 public:
  enum class Step { waiting, closed, admitted };
  Handshakes(const RunContext& ctx, const ServerPlan& plan, net::RateLimitedLog& log)
      : ctx_(ctx), plan_(plan), log_(log) {
    seen_.reserve(plan.expect_connections);
  }

  // Reads what the connection has sent (readable) and acts on a complete message; closes it past
  // its deadline. admitted: the verdict went out and the caller registers the flow at once.
  Step advance(Pending& p, bool readable, std::int64_t now) {
    if (readable) {
      // Exactly the current message's bytes: nothing after a PROOF is read before the verdict.
      const std::size_t want = p.challenged ? dh::kProofSize : dh::kHelloSize;
      const ssize_t k = ::recv(p.fd.get(), p.buf.data() + p.got, want - p.got, MSG_DONTWAIT);
      if (k > 0) {
        p.got += static_cast<std::size_t>(k);
        if (p.got == want && p.challenged) return on_proof(p) ? Step::admitted : Step::closed;
        if (p.got == want && !on_hello(p)) return Step::closed;
      } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        const std::string e = errno_text(k == 0 ? ECONNRESET : errno);
        // A client that leaves after the challenge refused this server's proof.
        drop(p, "data connection from {}: {}", who(p),
             p.challenged ? fmt::format("closed without its proof ({}; the client did not accept this server's "
                                        "proof: another test's key?)",
                                        e)
                          : fmt::format("no hello ({})", e));
        return Step::closed;
      }
    }
    if (now < p.deadline_ns) return Step::waiting;
    drop(p, "data connection from {}: no {} ({})", who(p), p.challenged ? "proof" : "hello", errno_text(ETIMEDOUT));
    return Step::closed;
  }

 private:
  // Closes the connection with a log line naming the peer. False, the exchange's end, for the
  // caller to return.
  template <typename... Args>
  bool drop(Pending& p, fmt::format_string<Args...> f, Args&&... args) {
    p.fd.reset();
    log_.warn(f, std::forward<Args>(args)...);
    return false;
  }

  // Refuses the connection: the status in the message its place calls for, then drop().
  bool refuse(Pending& p, dh::Status st, const std::string& why) {
    (void)(p.challenged ? send_now(p.fd.get(), dh::encode_verdict(st))
                        : send_now(p.fd.get(), dh::encode_challenge({st, {}, {}})));
    return drop(p, "rejected data connection from {}: {}", who(p), why);
  }

  // Sends the next message of the exchange; one that cannot go drops the connection (false).
  template <std::size_t N>
  bool answer(Pending& p, const std::array<std::uint8_t, N>& b, const char* what) {
    if (send_now(p.fd.get(), b)) return true;
    const int e = errno;
    return drop(p, "data connection from {}: {} not sent ({})", who(p), what, errno_text(e));
  }

  static std::uint64_t key(const Pending& p) { return (std::uint64_t{p.hello.client_node} << 32) | p.hello.conn_index; }

  // Refuses the connection when its place is taken (checked at HELLO, and again after the PROOF:
  // another connection may have taken it meanwhile). True when it may go on.
  bool available(Pending& p) {
    if (seen_.count(key(p)) != 0) {
      return refuse(p, dh::Status::duplicate,
                    fmt::format("client {} connection {} already connected", p.hello.client_node, p.hello.conn_index));
    }
    return accepted_ < plan_.expect_connections ||
           refuse(p, dh::Status::too_many, "more connections than the test has");
  }

  // The HELLO is complete: its checks, then the CHALLENGE. True when the exchange goes on.
  bool on_hello(Pending& p) {
    try {
      p.hello = dh::decode_hello(p.buf);
    } catch (const dh::WireError& e) {
      return refuse(p, e.status(), e.what());
    }
    if (p.hello.server_node != ctx_.node_index()) {
      return refuse(p, dh::Status::wrong_server,
                    fmt::format("hello meant for node {}, this is node {} (a relayed hello?)", p.hello.server_node,
                                ctx_.node_index()));
    }
    const dh::Op op = p.hello.op;
    const bool op_ok =
        (op == dh::Op::probe && ctx_.spec().delay_probe().count() != 0) ||
        (ctx_.spec().mode() == Mode::rpc ? op == dh::Op::rpc : (op == dh::Op::write || op == dh::Op::read));
    if (!op_ok)
      return refuse(p, dh::Status::wrong_op, fmt::format("operation {} does not match the test", static_cast<int>(op)));
    if (!available(p)) return false;
    p.key = derive_client_token(plan_.token, p.hello.client_node);
    p.server_nonce = auth::make_nonce();
    if (!answer(p,
                dh::encode_challenge(
                    {dh::Status::ok, p.server_nonce, dh::server_proof(p.key, plan_.test_id, p.hello, p.server_nonce)}),
                "challenge")) {
      return false;
    }
    p.challenged = true;
    p.got = 0;
    return true;
  }

  // The PROOF is complete: verified, then the VERDICT. True when the verdict went out and the
  // connection is taken.
  bool on_proof(Pending& p) {
    auth::Proof got{};
    try {
      got = dh::decode_proof(std::span<const std::uint8_t>(p.buf.data(), dh::kProofSize));
    } catch (const dh::WireError& e) {
      return refuse(p, dh::Status::bad_proof, e.what());
    }
    if (!auth::proofs_equal(dh::client_proof(p.key, plan_.test_id, p.hello, p.server_nonce), got)) {
      return refuse(
          p, dh::Status::bad_proof,
          "client proof does not verify (another test's key, or a hello replayed or relayed from another connection)");
    }
    if (!available(p)) return false;
    if (!answer(p, dh::encode_verdict(dh::Status::ok), "verdict")) return false;
    seen_.insert(key(p));
    ++accepted_;
    return true;
  }

  const RunContext& ctx_;
  const ServerPlan& plan_;
  net::RateLimitedLog& log_;
  std::unordered_set<std::uint64_t> seen_;  // (client node, connection index) already accepted
  std::uint32_t accepted_{0};
};

// Everything the listen backlog holds, up to the bound: a burst is taken in at once. Past the
// bound from one address, that address's oldest handshake gives way.
void accept_burst(int listen_fd, std::vector<Pending>& pending, std::int64_t now, std::int64_t& paused_until,
                  net::RateLimitedLog& log) {
  while (pending.size() < kMaxPendingHandshakes) {
    sockaddr_storage peer{};
    socklen_t plen = sizeof peer;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // EMFILE and friends leave the connection in the backlog, so the listener stays
      // readable: polling it again at once would spin. Pause it instead.
      if (net::accept_out_of_resources(errno)) paused_until = now + net::kAcceptPauseNs;
      return;
    }
    Pending p;
    p.fd.reset(fd);
    p.remote = sockaddr_text(peer);
    if (!net::is_loopback(peer)) p.source = net::numeric_host(peer);
    p.deadline_ns = now + std::int64_t{kHandshakeTimeoutMs} * 1'000'000;
    auto same = [&](const Pending& q) { return q.source == p.source; };
    if (!p.source.empty() &&
        std::ranges::count_if(pending, same) >= static_cast<std::ptrdiff_t>(kMaxPendingPerSource)) {
      auto oldest = std::ranges::find_if(pending, same);
      log.warn("data connection from {}: closed to make room for {}: more than {} handshakes from one address",
               who(*oldest), p.remote, kMaxPendingPerSource);
      pending.erase(oldest);
    }
    pending.push_back(std::move(p));
  }
}

}  // namespace

void tcp::client_handshake(int fd, const std::string& where, const proto::Token& client_key, std::string_view test_id,
                           const data_hello::Hello& hello) {
  const std::int64_t deadline = mono_now_ns() + std::int64_t{kHandshakeTimeoutMs} * 1'000'000;
  auto fail = [&](const std::string& why) -> void { throw SystemError("data handshake with", where, why); };
  // One message sent or received whole on the non-blocking socket by the deadline (poll); `step`
  // names what a failure was waiting for (EOF reads as ECONNRESET).
  auto io = [&](auto& bytes, bool sending, const char* step) {
    for (std::size_t done = 0; done < bytes.size();) {
      const auto left_ms = static_cast<int>((deadline - mono_now_ns()) / 1'000'000);
      pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
      const int pr = left_ms <= 0 ? 0 : ::poll(&pfd, 1, left_ms);
      const std::size_t n = bytes.size() - done;
      const ssize_t k = pr <= 0   ? -1
                        : sending ? ::send(fd, bytes.data() + done, n, MSG_NOSIGNAL | MSG_DONTWAIT)
                                  : ::recv(fd, bytes.data() + done, n, MSG_DONTWAIT);
      const int e = pr == 0 ? ETIMEDOUT : k == 0 ? ECONNRESET : errno;
      if (k > 0) {
        done += static_cast<std::size_t>(k);
      } else if (k == 0 || (e != EINTR && (pr <= 0 || e != EAGAIN))) {  // not a poll or call to retry
        fail(fmt::format("no {} from a fabperf agent of this test ({}); not an agent of this test?", step,
                         errno_text(e)));
      }
    }
  };
  // The next message received whole and decoded; `what` says what bytes that do not decode mean.
  auto receive = [&](auto bytes, auto decoder, const char* step, const char* what) {
    io(bytes, false, step);
    try {
      return decoder(bytes);
    } catch (const dh::WireError& e) {
      throw SystemError("data handshake with", where, fmt::format("{} ({}); no load sent", what, e.what()));
    }
  };
  auto hb = dh::encode_hello(hello);
  io(hb, true, "answer");
  const dh::Challenge ch = receive(dh::ChallengeBytes{}, dh::decode_challenge, "challenge",
                                   "the peer is not a fabperf agent of this version");
  if (ch.status != dh::Status::ok) fail(fmt::format("server refused the connection: {}", dh::status_text(ch.status)));
  if (!auth::proofs_equal(dh::server_proof(client_key, test_id, hello, ch.server_nonce), ch.server_proof)) {
    fail(
        "the peer did not prove it is an agent of this test (wrong server proof: another test's key, or a relay); "
        "no load sent");
  }
  auto pb = dh::encode_proof(dh::client_proof(client_key, test_id, hello, ch.server_nonce));
  io(pb, true, "verdict");
  const dh::Status verdict = receive(dh::VerdictBytes{}, dh::decode_verdict, "verdict", "malformed verdict");
  if (verdict != dh::Status::ok) fail(fmt::format("server refused the connection: {}", dh::status_text(verdict)));
}

// Data handshakes run concurrently on this one thread: every accepted connection goes through its
// exchange in a poll set, so a client that is slow to send (or never does) holds one slot until
// its own deadline instead of holding up every connection behind it. At 512 agents each server
// gets ~1000 connections in one burst; one at a time, clients at the back of the queue missed
// their 5 s deadline on a loaded host (docs/performance.md). The checks and the bookkeeping
// (seen, accepted) stay single-threaded. The bound keeps a flood of silent connections from
// using up descriptors; past it, new connections wait in the listen backlog.
void TcpEngine::accept_loop() {
  RunContext& ctx = *ctx_;
  net::RateLimitedLog log("data connections that did not complete their handshake");
  Handshakes hs(ctx, server_plan_, log);
  std::vector<Pending> pending;
  std::vector<pollfd> pfds;
  // Non-blocking listener: the accept loop below takes what the backlog holds and no more.
  fcntl(listen_fd_.get(), F_SETFL, fcntl(listen_fd_.get(), F_GETFL) | O_NONBLOCK);
  std::int64_t accept_paused_until = 0;  // out of descriptors: accept again after a pause
  while (!accept_stop_.load() && !ctx.aborted()) {
    const bool room = pending.size() < kMaxPendingHandshakes && mono_now_ns() >= accept_paused_until;
    pfds.clear();
    pfds.push_back({room ? listen_fd_.get() : -1, POLLIN, 0});  // poll ignores a negative fd
    // Asleep until a connection, a handshake's message or deadline, the end of an accept pause, or
    // stop_accept(); the tick only bounds a missed wake-up (an agent idle in a test wakes 1/s, not 10/s).
    std::int64_t wake = mono_now_ns() + std::int64_t{kTickMs} * 1'000'000;
    if (!room && pending.size() < kMaxPendingHandshakes) wake = std::min(wake, accept_paused_until);
    for (const auto& p : pending) {
      pfds.push_back({p.fd.get(), POLLIN, 0});
      wake = std::min(wake, p.deadline_ns);
    }
    pfds.push_back({accept_wake_fd_.get(), POLLIN, 0});
    const auto ms = std::max<std::int64_t>(0, (wake - mono_now_ns() + 999'999) / 1'000'000);
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(ms)) < 0) continue;
    const std::int64_t now = mono_now_ns();
    std::size_t keep = 0;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      const auto step = hs.advance(p, pfds[i + 1].revents != 0, now);
      if (step == Handshakes::Step::admitted) {
        // Registered before the next poll, so that seal() (which joins this thread) never misses
        // a connection whose verdict was sent.
        add_flow(ctx, p.fd.release(), FlowRole::server, static_cast<FlowOp>(static_cast<int>(p.hello.op) - 1),
                 p.hello.client_node, p.remote);
      } else if (step == Handshakes::Step::waiting) {
        if (keep != i) pending[keep] = std::move(p);
        ++keep;
      }
    }
    pending.resize(keep);
    if (room && (pfds[0].revents & POLLIN) != 0) accept_burst(listen_fd_.get(), pending, now, accept_paused_until, log);
  }
  // The test is sealed (or aborted): every client of the test has its verdict by now, so what is
  // still in its handshake (closed with `pending`) is not one of its connections.
}

}  // namespace fabperf
