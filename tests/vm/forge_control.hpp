// The control side of the VM lab's hostile peers (cm_forge.cpp, qp_forge.cpp): they act as a
// coordinator towards one agent over the same TLS 1.3 PSK connection fabperf's own coordinator
// uses, with every wait bounded. Test code only.
#pragma once

#include "integration/tls_peer.hpp"

#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fabperf::forge {

inline constexpr int kStepMs = 10000;  // emulated RDMA is slow: generous, but every wait is bounded

[[noreturn]] inline void die(const std::string& what) {
  throw std::runtime_error(what);
}

// ---- the control connection (TLS 1.3 with the key's PSK, as fabperf's own coordinator) -------
struct Control {
  int fd{-1};
  std::unique_ptr<test::TlsPeer> tls;
  std::mutex send_mu;  // the heartbeat thread sends beside the caller (it never reads)
  std::thread heartbeats;
  std::mutex beat_mu;
  std::condition_variable beat_cv;
  bool stop{false};
  ~Control() {
    if (heartbeats.joinable()) {
      {
        std::lock_guard lk(beat_mu);
        stop = true;
      }
      beat_cv.notify_all();
      heartbeats.join();
    }
    tls.reset();
    if (fd >= 0) ::close(fd);
  }
};

inline void send_frame(Control& c, proto::MsgType t, const nlohmann::json& body) {
  auto f = proto::encode_frame(t, body);
  std::lock_guard lk(c.send_mu);
  if (!c.tls->send(f.data(), f.size())) die("control: send failed");
}

// A coordinator heartbeat every second from now on, as fabperf's own coordinator sends: the agent
// drops a coordinator silent for 4 s, and a forge's slow steps (rdma_cm on emulated RDMA, under
// load) can take that long. Only after the last read_frame: TLS reads and writes may not overlap.
inline void keep_alive(Control& c) {
  c.heartbeats = std::thread([&c] {
    std::unique_lock lk(c.beat_mu);
    while (!c.beat_cv.wait_for(lk, std::chrono::seconds(1), [&c] { return c.stop; })) {
      const auto f = proto::encode_frame(proto::MsgType::heartbeat, nlohmann::json::object());
      std::lock_guard send(c.send_mu);
      if (!c.tls->send(f.data(), f.size())) return;
    }
  });
}

inline std::pair<proto::MsgType, nlohmann::json> read_frame(Control& c) {
  for (;;) {
    std::array<std::uint8_t, proto::kHeaderSize> h{};
    if (!c.tls->recv_exact(h.data(), h.size(), kStepMs)) die("control: no frame from the agent");
    const auto hdr = proto::decode_header(h);
    std::vector<std::uint8_t> body(hdr.length);
    if (!c.tls->recv_exact(body.data(), body.size(), kStepMs)) die("control: short frame");
    if (hdr.type == proto::MsgType::heartbeat) continue;
    return {hdr.type, proto::parse_body(hdr.type, body)};
  }
}

inline std::unique_ptr<Control> control_connect(const std::string& addr, std::uint16_t port, const auth::Key& key,
                                                const std::string& name) {
  auto c = std::make_unique<Control>();
  c->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) die("'" + addr + "' is not an IPv4 address");
  if (::connect(c->fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    die("control: connect: " + std::string(std::strerror(errno)));
  c->tls = std::make_unique<test::TlsPeer>(c->fd, key, kStepMs);
  if (!c->tls->ok()) die("control: TLS handshake with the agent failed (key?): " + c->tls->error);
  send_frame(*c, proto::MsgType::hello,
             proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, name, proto::local_capabilities()}));
  auto [t, body] = read_frame(*c);
  if (t != proto::MsgType::hello_ok) die("control: expected HELLO_OK, got " + body.dump());
  return c;
}

}  // namespace fabperf::forge
