// The test specification: validated once, immutable afterwards, and separate from its wire
// encoding. Nothing in fabperf changes a setting behind the user's back: a value that cannot be
// honoured is an error (or, where the kernel clamps it, a reported warning), never a silent edit.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace fabperf {

// nsdperf's tests. nwrite: the server pulls the client's data (differs from write only over RDMA;
// over TCP it moves the same bytes the same way). swrite/sread: each tester thread sticks to one
// server instead of cycling over all of them. rw: half the threads read, half write.
enum class TestKind { write, read, rw, nwrite, swrite, sread };
// Data flows from client to server for write-like tests.
bool is_write_like(TestKind t);
bool is_sticky(TestKind t);
enum class Mode { rpc, stream };
enum class Transport { tcp, rdma };
enum class RdmaVerb { write, send };
// How TCP senders hand data to the kernel. automatic: each agent tries write and sendfile during
// the warm-up and keeps the faster on its host (engine/trial.hpp); the result says what ran.
enum class SendMethod { automatic, write, sendfile, zerocopy };

std::string_view to_string(TestKind t);
std::string_view to_string(Mode m);
std::string_view to_string(Transport t);
TestKind parse_test_kind(std::string_view s);  // throws UsageError
Mode parse_mode(std::string_view s);
Transport parse_transport(std::string_view s);
RdmaVerb parse_rdma_verb(std::string_view s);  // write | send
std::string_view to_string(RdmaVerb v);
std::string_view to_string(SendMethod m);          // auto, write, sendfile, zerocopy
SendMethod parse_send_method(std::string_view s);  // throws UsageError naming the value

// Limits (nsdperf's where it has them: docs/usage.md).
namespace limits {
inline constexpr std::uint64_t kMinBuffsize = 4ULL * 1024;
inline constexpr std::uint64_t kMaxBuffsize = 16ULL * 1024 * 1024;
inline constexpr std::uint64_t kMaxSocksize = 100ULL * 1024 * 1024;
inline constexpr std::uint32_t kMaxThreads = 4096;
inline constexpr std::uint32_t kMaxParallel = 8191;
inline constexpr std::chrono::nanoseconds kMinTime = std::chrono::milliseconds(200);
inline constexpr std::chrono::nanoseconds kMaxTime = std::chrono::hours(24 * 7);
inline constexpr std::uint32_t kMaxBusyPollUs = 1'000'000;
inline constexpr int kMaxCpus = 4096;  // CPU numbers 0..kMaxCpus-1
inline constexpr std::int32_t kMaxGidIndex = 65535;
inline constexpr std::uint32_t kMaxQdepth = 4096;  // also --cq-mod's bound before --qdepth is known
inline constexpr std::uint32_t kMaxInline = 4096;
}  // namespace limits

// Every setting's C++ type, its name and its default, declared once: SpecParams holds each as an
// optional (what the user gave; unset and default stay distinguishable), TestSpec the resolved
// value behind a getter of the same name. What each means: the settings table (settings.hpp).
// (--zerocopy is SpecParams' alone: TestSpec's zerocopy() is send_method() == zerocopy.)
#define FABPERF_SPEC_FIELDS(X)                                                                                  \
  X(TestKind, test, TestKind::write)                                                                            \
  X(Mode, mode, Mode::rpc)                                                                                      \
  X(Transport, transport, Transport::tcp)                                                                       \
  X(std::uint64_t, buffsize, 4ULL * 1024 * 1024)                                                                \
  X(std::uint64_t, socksize, 0)                                                                                 \
  /* --socksize auto: the coordinator sets socksize from the bandwidth-delay product before the */              \
  /* set-up (0 while unresolved, or when the link speed is unknown: the OS sizes) */                            \
  X(bool, socksize_auto, false)                                                                                 \
  X(std::uint32_t, threads, 4)                                                                                  \
  X(std::uint32_t, parallel, 1)                                                                                 \
  X(std::chrono::nanoseconds, time, std::chrono::seconds(10))                                                   \
  /* The measurement window is [warmup, time - cooldown] after the common start (default: 10%) */               \
  X(std::chrono::nanoseconds, warmup, 0)                                                                        \
  X(std::chrono::nanoseconds, cooldown, 0)                                                                      \
  /* Data-plane tuning (docs/performance.md). */                                                                \
  X(bool, skip_rx_copy, false)                                                                                  \
  X(SendMethod, send_method, SendMethod::automatic)                                                             \
  X(std::string, congestion, std::string())                                                                     \
  X(std::uint64_t, rate, 0)                                               /* bytes/s per connection; 0 = off */ \
  X(std::uint32_t, busy_poll_us, 0)                                       /* 0 = off */                         \
  X(std::uint64_t, notsent_lowat, 0)                                      /* 0 = kernel default */              \
  X(std::chrono::nanoseconds, delay_probe, std::chrono::milliseconds(10)) /* 0 = off */                         \
  X(std::vector<int>, cpus, std::vector<int>())                           /* empty = NUMA-local default */      \
  X(bool, no_affinity, false)                                                                                   \
  X(bool, verify, false)                                                                                        \
  X(bool, spread_ports, false)                                                                                  \
  /* RDMA verbs engine (docs/rdma.md). */                                                                       \
  X(std::string, rdma_device, std::string()) /* empty = every device */                                         \
  X(std::int32_t, gid_index, -1)             /* -1 = the RoCE v2 GID matching the test address */               \
  X(RdmaVerb, rdma_verb, RdmaVerb::write)                                                                       \
  X(std::uint32_t, qdepth, 16)                                                                                  \
  X(std::uint32_t, inline_size, 0)                                                                              \
  X(std::uint32_t, cq_mod, 1)                                                                                   \
  X(bool, rdma_events, false)                                                                                   \
  X(bool, rdma_cm, false)

// What the user may set: an optional each, unset or given.
#define FABPERF_SPEC_OPTIONAL(T, name, deflt) std::optional<T> name;
// The resolved test: a getter each (small values by value, strings and lists by reference).
#define FABPERF_SPEC_GETTER(T, name, deflt)                                                     \
  [[nodiscard]] std::conditional_t<std::is_trivially_copyable_v<T>, T, const T&> name() const { \
    return name##_;                                                                             \
  }
#define FABPERF_SPEC_MEMBER(T, name, deflt) T name##_{deflt};

struct SpecParams {
  FABPERF_SPEC_FIELDS(FABPERF_SPEC_OPTIONAL)
  std::optional<bool> zerocopy;  // the same as send_method zerocopy
};

class TestSpec {
 public:
  // Applies defaults and validates; throws UsageError naming the setting and the problem.
  static TestSpec make(const SpecParams& p);

  FABPERF_SPEC_FIELDS(FABPERF_SPEC_GETTER)
  // The same test with --socksize auto resolved to `bytes` (the one change made to a made spec;
  // the result says why: RunRecord::socksize_basis). Throws UsageError past limits::kMaxSocksize.
  [[nodiscard]] TestSpec with_auto_socksize(std::uint64_t bytes) const;
  [[nodiscard]] std::chrono::nanoseconds window() const { return time_ - warmup_ - cooldown_; }
  [[nodiscard]] bool zerocopy() const { return send_method_ == SendMethod::zerocopy; }
  // Connections a client opens to one server (rw in stream mode opens both directions).
  [[nodiscard]] std::uint32_t connections_per_pair() const;

  friend bool operator==(const TestSpec&, const TestSpec&) = default;

 private:
  TestSpec() = default;
  FABPERF_SPEC_FIELDS(FABPERF_SPEC_MEMBER)
};
#undef FABPERF_SPEC_OPTIONAL
#undef FABPERF_SPEC_GETTER
#undef FABPERF_SPEC_MEMBER

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; throws UsageError naming `what`.
std::vector<int> parse_cpu_list(std::string_view text, std::string_view what);

// Wire encoding (the control protocol carries it; a result's "settings"). Generated from the
// settings table (settings.hpp): each setting writes and reads its own key; the decoder checks
// JSON types and re-validates every range through make(), the one place ranges live.
nlohmann::json to_json(const TestSpec& s);
TestSpec spec_from_json(const nlohmann::json& j);  // throws ProtocolError

// host[:port], [v6addr]:port, or a bare IPv6 address. Port defaults to 6668 (nsdperf's).
inline constexpr std::uint16_t kDefaultAgentPort = 6668;
struct HostPort {
  std::string host;
  std::uint16_t port{kDefaultAgentPort};
  // Data addresses, one per link, when the host has several (NAME@ADDR+ADDR): connection c of a
  // client-server pair uses link c mod L on both ends. Empty: data goes to the control address.
  std::vector<std::string> links;
  [[nodiscard]] std::string str() const;  // host:port, brackets IPv6 literals (links not shown)
  friend bool operator==(const HostPort&, const HostPort&) = default;
};
// NAME[:PORT][@ADDR[+ADDR...]]; throws UsageError.
HostPort parse_host_port(std::string_view text, std::string_view what);
// The host of an endpoint's text: "10.0.0.1:6668" -> "10.0.0.1", "[fd00::1]:6668" -> "fd00::1"; a
// name or a bare IPv6 address alone as it is. Never throws.
std::string host_of(std::string_view endpoint);
// Why host does not resolve (getaddrinfo's gai_strerror), or nullptr when it does.
const char* resolve_error(const std::string& host);

}  // namespace fabperf
