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

// What the user may set; every field optional so "unset" and "default" stay distinguishable.
struct SpecParams {
  std::optional<TestKind> test;
  std::optional<Mode> mode;
  std::optional<Transport> transport;
  std::optional<std::uint64_t> buffsize;
  std::optional<std::uint64_t> socksize;
  std::optional<bool> socksize_auto;  // --socksize auto: the coordinator sizes it from the BDP
  std::optional<std::uint32_t> threads;
  std::optional<std::uint32_t> parallel;
  std::optional<std::chrono::nanoseconds> time;
  std::optional<std::chrono::nanoseconds> warmup;
  std::optional<std::chrono::nanoseconds> cooldown;
  // Data-plane tuning (docs/performance.md).
  std::optional<bool> skip_rx_copy;                     // MSG_TRUNC: the kernel discards received data
  std::optional<bool> zerocopy;                         // MSG_ZEROCOPY sends, completions reaped
  std::optional<SendMethod> send_method;                // --send-method; --zerocopy is zerocopy
  std::optional<std::string> congestion;                // TCP_CONGESTION, e.g. cubic, bbr
  std::optional<std::uint64_t> rate;                    // SO_MAX_PACING_RATE per connection, bytes/s; 0 = off
  std::optional<std::uint32_t> busy_poll_us;            // SO_BUSY_POLL; 0 = off
  std::optional<std::uint64_t> notsent_lowat;           // TCP_NOTSENT_LOWAT; 0 = kernel default
  std::optional<std::chrono::nanoseconds> delay_probe;  // ping period for the delay histogram; 0 = off
  std::optional<std::vector<int>> cpus;                 // pin data threads round-robin; empty = NUMA-local default
  std::optional<bool> no_affinity;                      // never pin
  std::optional<bool> verify;                           // receivers check every byte against the pattern
  // RDMA verbs engine (docs/rdma.md).
  std::optional<std::string> rdma_device;    // DEV[:PORT][,DEV[:PORT]...]; empty = every device
  std::optional<std::int32_t> gid_index;     // -1 = the RoCE v2 GID matching the test address
  std::optional<RdmaVerb> rdma_verb;         // how write-like data moves: RDMA WRITE or SEND
  std::optional<std::uint32_t> qdepth;       // work requests outstanding per QP
  std::optional<std::uint32_t> inline_size;  // max_inline_data asked for; blocks up to it go inline
  std::optional<std::uint32_t> cq_mod;       // stream senders ask for a completion every N posts
  std::optional<bool> rdma_events;           // completion events instead of busy polling
  std::optional<bool> rdma_cm;               // connect queue pairs with librdmacm, not via the coordinator
  std::optional<bool> spread_ports;          // bind client source ports that cover every bond member
};

class TestSpec {
 public:
  // Applies defaults and validates; throws UsageError naming the setting and the problem.
  static TestSpec make(const SpecParams& p);

  [[nodiscard]] TestKind test() const { return test_; }
  [[nodiscard]] Mode mode() const { return mode_; }
  [[nodiscard]] Transport transport() const { return transport_; }
  [[nodiscard]] std::uint64_t buffsize() const { return buffsize_; }
  [[nodiscard]] std::uint64_t socksize() const { return socksize_; }
  // --socksize auto: the coordinator sets socksize from the bandwidth-delay product before the
  // set-up (0 while unresolved, or when the link speed is unknown: the OS sizes).
  [[nodiscard]] bool socksize_auto() const { return socksize_auto_; }
  // The same test with --socksize auto resolved to `bytes` (the one change made to a made spec;
  // the result says why: RunRecord::socksize_basis). Throws UsageError past limits::kMaxSocksize.
  [[nodiscard]] TestSpec with_auto_socksize(std::uint64_t bytes) const;
  [[nodiscard]] std::uint32_t threads() const { return threads_; }
  [[nodiscard]] std::uint32_t parallel() const { return parallel_; }
  [[nodiscard]] std::chrono::nanoseconds time() const { return time_; }
  // The measurement window is [warmup, time - cooldown] after the common start.
  [[nodiscard]] std::chrono::nanoseconds warmup() const { return warmup_; }
  [[nodiscard]] std::chrono::nanoseconds cooldown() const { return cooldown_; }
  [[nodiscard]] std::chrono::nanoseconds window() const { return time_ - warmup_ - cooldown_; }

  [[nodiscard]] bool skip_rx_copy() const { return skip_rx_copy_; }
  [[nodiscard]] SendMethod send_method() const { return send_method_; }
  [[nodiscard]] bool zerocopy() const { return send_method_ == SendMethod::zerocopy; }
  [[nodiscard]] const std::string& congestion() const { return congestion_; }
  [[nodiscard]] std::uint64_t rate() const { return rate_; }
  [[nodiscard]] std::uint32_t busy_poll_us() const { return busy_poll_us_; }
  [[nodiscard]] std::uint64_t notsent_lowat() const { return notsent_lowat_; }
  [[nodiscard]] std::chrono::nanoseconds delay_probe() const { return delay_probe_; }
  [[nodiscard]] const std::vector<int>& cpus() const { return cpus_; }
  [[nodiscard]] bool no_affinity() const { return no_affinity_; }
  [[nodiscard]] bool verify() const { return verify_; }
  [[nodiscard]] const std::string& rdma_device() const { return rdma_device_; }
  [[nodiscard]] std::int32_t gid_index() const { return gid_index_; }
  [[nodiscard]] RdmaVerb rdma_verb() const { return rdma_verb_; }
  [[nodiscard]] std::uint32_t qdepth() const { return qdepth_; }
  [[nodiscard]] std::uint32_t inline_size() const { return inline_size_; }
  [[nodiscard]] std::uint32_t cq_mod() const { return cq_mod_; }
  [[nodiscard]] bool rdma_events() const { return rdma_events_; }
  [[nodiscard]] bool rdma_cm() const { return rdma_cm_; }
  [[nodiscard]] bool spread_ports() const { return spread_ports_; }

  // Connections a client opens to one server (rw in stream mode opens both directions).
  [[nodiscard]] std::uint32_t connections_per_pair() const;

  friend bool operator==(const TestSpec&, const TestSpec&) = default;

 private:
  TestSpec() = default;
  TestKind test_{TestKind::write};
  Mode mode_{Mode::rpc};
  Transport transport_{Transport::tcp};
  std::uint64_t buffsize_{0};
  std::uint64_t socksize_{0};
  bool socksize_auto_{false};
  std::uint32_t threads_{0};
  std::uint32_t parallel_{0};
  std::chrono::nanoseconds time_{0};
  std::chrono::nanoseconds warmup_{0};
  std::chrono::nanoseconds cooldown_{0};
  bool skip_rx_copy_{false};
  SendMethod send_method_{SendMethod::automatic};
  std::string congestion_;
  std::uint64_t rate_{0};
  std::uint32_t busy_poll_us_{0};
  std::uint64_t notsent_lowat_{0};
  std::chrono::nanoseconds delay_probe_{std::chrono::milliseconds(10)};
  std::vector<int> cpus_;
  bool no_affinity_{false};
  bool verify_{false};
  std::string rdma_device_;
  std::int32_t gid_index_{-1};
  RdmaVerb rdma_verb_{RdmaVerb::write};
  std::uint32_t qdepth_{16};
  std::uint32_t inline_size_{0};
  std::uint32_t cq_mod_{1};
  bool rdma_events_{false};
  bool rdma_cm_{false};
  bool spread_ports_{false};
};

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
// Why host does not resolve (getaddrinfo's gai_strerror), or nullptr when it does.
const char* resolve_error(const std::string& host);

}  // namespace fabperf
