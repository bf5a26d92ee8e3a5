// The control protocol: length-prefixed frames (magic, version, type, length) carrying JSON
// bodies. Every frame is size-capped before anything is allocated, every body is parsed into a
// typed message field by field (type and range), and anything else is a ProtocolError that names
// the message and the field. The transport (Asio) lives in src/proto/conn.hpp; this header is
// pure so the fuzzer and unit tests can drive it without sockets.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/core/bytes.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

namespace fabperf::proto {

inline constexpr std::uint32_t kMagic = 0x46425046;  // "FBPF"
// 2: shared-key authentication (AUTH/AUTH_OK), capabilities, data-plane hello with proofs.
// 3: keyed connections run TLS 1.3 with the key's PSK (src/proto/tls_psk.hpp); AUTH/AUTH_OK and
//    HELLO's nonce are gone.
// 4: HELLO_OK states the agent's address on the connection (a keyed coordinator refuses a relay).
inline constexpr std::uint16_t kVersion = 4;
inline constexpr std::size_t kHeaderSize = 12;
// Results of a large test are the biggest frames; 16 MiB holds ~80k connections.
inline constexpr std::uint32_t kMaxBody = 16u << 20;
// Until a peer has proven it holds the key, no frame may be larger than this (HELLO, AUTH,
// AUTH_OK, ERROR are all far smaller): nothing large is buffered or parsed for a stranger.
inline constexpr std::uint32_t kMaxPreAuthBody = 4096;
inline constexpr std::size_t kMaxCaps = 32;
inline constexpr std::size_t kMaxCapLength = 64;

enum class MsgType : std::uint16_t {
  hello = 1,
  hello_ok = 2,
  ping = 3,
  pong = 4,
  setup_server = 5,
  setup_server_ok = 6,
  setup_client = 7,
  setup_client_ok = 8,
  start = 9,
  heartbeat = 10,
  abort = 11,
  result = 12,
  error = 13,
  bye = 14,
  // 15, 16: protocol 2's AUTH and AUTH_OK, retired (unknown types since protocol 3).
  // 17-19: administration outside a test (polish branch's range).
  links_request = 17,  // coordinator -> agent: send the link inventory
  links = 18,          // agent -> coordinator: LinksReply
  shutdown = 19,       // coordinator -> agent: exit cleanly (shell kill/killall); answered BYE or ERROR
  // 20-25: RDMA connection set-up (rdmacm branch's range).
  rdma_connect = 20,     // coordinator -> server agent: the clients' queue pair endpoints (RdmaConnect)
  rdma_connect_ok = 21,  // server agent -> coordinator: its queue pairs are ready to send (RdmaConnectOk)
};
inline constexpr std::uint16_t kMaxMsgType = 21;
std::string_view to_string(MsgType t);

struct Header {
  std::uint16_t version{kVersion};
  MsgType type{MsgType::hello};
  std::uint32_t length{0};
};

// Throws ProtocolError: wrong magic, other version (names both), unknown type, length over cap.
Header decode_header(std::span<const std::uint8_t, kHeaderSize> bytes, std::uint32_t max_body = kMaxBody);
std::array<std::uint8_t, kHeaderSize> encode_header(MsgType type, std::uint32_t length);
// Header + serialized body; throws ProtocolError if the body exceeds the cap.
std::vector<std::uint8_t> encode_frame(MsgType type, const nlohmann::json& body);
// Parses a body (must be a JSON object); throws ProtocolError naming the message type.
nlohmann::json parse_body(MsgType type, std::span<const std::uint8_t> body);

// ---- Typed messages -----------------------------------------------------------------------

inline constexpr std::size_t kTokenBytes = 16;
using Token = std::array<std::uint8_t, kTokenBytes>;
Token token_from_hex(std::string_view hex, const std::string& context);  // throws ProtocolError
Token random_token();

// Capabilities this build advertises in HELLO and HELLO_OK.
std::vector<std::string> local_capabilities();

struct Hello {
  std::uint32_t proto_min{kVersion};
  std::uint32_t proto_max{kVersion};
  std::string coordinator;  // a name for logs and "busy" messages
  std::vector<std::string> caps;
};
struct HelloOk {
  std::uint32_t proto{kVersion};
  std::string hostname;
  std::string version;
  std::int64_t pid{0};
  std::vector<std::string> caps;
  // The agent's address on this connection (numeric): inside an authenticated session it binds
  // the agent that answered to the host the coordinator dialled, so a relay cannot swap agents.
  std::string address;
};
struct Ping {
  std::uint64_t seq{0};
};
struct Pong {
  std::uint64_t seq{0};
  std::int64_t t_rx{0};  // agent clock when the ping arrived
  std::int64_t t_tx{0};  // agent clock when the pong left
  // Agent's wall clock (CLOCK_REALTIME, ns since the epoch) when the pong left; 0 when the agent
  // does not send it. Only pre-flight's clock check uses it: tests run on the monotonic clock.
  std::int64_t t_wall{0};
};
// One end of an RDMA reliable-connected queue pair, as the other end needs it to connect
// (docs/rdma.md "Exchange"): exchanged through the coordinator unless the test uses --rdma-cm.
struct RdmaEndpoint {
  std::uint32_t node{0};  // the node that owns this queue pair
  std::uint32_t peer{0};  // the node it connects to
  std::uint32_t conn{0};  // connection index within the client-server pair
  std::uint32_t qpn{0};   // 24 bits
  std::uint32_t psn{0};   // 24 bits
  std::uint32_t lid{0};   // InfiniBand only (16 bits); 0 on RoCE
  std::array<std::uint8_t, 16> gid{};
  std::uint64_t addr{0};  // the registered buffer (source block, then destination block)
  std::uint64_t len{0};
  std::uint32_t rkey{0};
  friend bool operator==(const RdmaEndpoint&, const RdmaEndpoint&) = default;
};
nlohmann::json to_json(const RdmaEndpoint&);

struct SetupServer {
  std::string test_id;
  Token token{};
  TestSpec spec = TestSpec::make({});
  std::uint32_t node_index{0};
  std::uint32_t expect_connections{0};
  bool any_address{false};  // listen on every address (the clients use per-link addresses)
  // RDMA over the control channel: the client nodes this server gets queue pairs for (each
  // connections_per_pair() of them) and this server's own per-link addresses (they choose the
  // RDMA port by GID). Empty for TCP and --rdma-cm.
  std::vector<std::uint32_t> rdma_clients{};
  std::vector<std::string> link_addrs{};
};
struct SetupServerOk {
  std::uint16_t data_port{0};  // 0: the transport needs none (RDMA queue pairs via the coordinator)
  std::vector<std::string> warnings;
  std::vector<RdmaEndpoint> rdma{};  // the server's queue pairs, waiting for their clients
};
struct Target {
  std::uint32_t node_index{0};
  std::string host;  // numeric address of the server agent (as the coordinator reached it)
  std::uint16_t port{0};
  std::vector<std::string> link_hosts;  // per link; connection c goes to link_hosts[c % L]
  std::vector<RdmaEndpoint> rdma{};     // the server's queue pairs for this client (one per connection)
};
struct SetupClient {
  std::string test_id;
  Token token{};
  TestSpec spec = TestSpec::make({});
  std::uint32_t node_index{0};
  std::vector<Target> targets{};
  std::vector<std::string> source_addrs{};  // per link: connection c binds source_addrs[c % L]
  // --bind-dev: SO_BINDTODEVICE per link (connection c binds bind_devs[c % size]); the single
  // entry "auto" means the device that owns each link's source address. Empty: no binding.
  std::vector<std::string> bind_devs{};
};
struct SetupClientOk {
  std::uint32_t connections{0};
  std::vector<std::string> warnings;
  std::vector<RdmaEndpoint> rdma{};  // the client's queue pairs, already connected (RTS)
};
// The coordinator forwards the clients' endpoints to the server that owns the other ends.
struct RdmaConnect {
  std::string test_id;
  std::vector<RdmaEndpoint> endpoints;
};
struct RdmaConnectOk {
  std::uint32_t queue_pairs{0};  // the server's queue pairs now ready to send
};
// All instants are on the receiving agent's monotonic clock.
struct Start {
  std::int64_t start_at{0};
  std::int64_t window_open{0};
  std::int64_t window_close{0};
  std::int64_t end_at{0};
  std::int64_t interval_ns{1'000'000'000};  // sampling period of the time series
};
struct Abort {
  std::string reason;
};
// The agent host's link inventory (links.hpp), as `fabperf links` prints it locally.
struct LinksReply {
  std::string hostname;
  std::vector<LinkInfo> links;
  SocketLimits limits;
  std::vector<RdmaDevice> rdma;  // /sys/class/infiniband; optional in the message
};
struct Shutdown {
  std::string reason;
};
// Why an agent answered ERROR: the one list of codes an agent sends (docs/architecture.md).
// On the wire as the lower-case names below; a code this build does not know (a newer agent's)
// decodes as `other`, its message kept.
enum class ErrorCode {
  busy,          // running another coordinator's test
  cleaning,      // still releasing the previous test; the coordinator retries for a while
  limit,         // over one of the agent's caps (--max-duration, buffers, connections, ...)
  protocol,      // a message out of order or not for this test
  version,       // no protocol version in common with the coordinator
  refused,       // a request the agent declines (SHUTDOWN to an agent started with --no-remote-kill, ...)
  setup_failed,  // SETUP_SERVER, SETUP_CLIENT or RDMA_CONNECT could not be carried out
  start_failed,  // START could not start the test
  result,        // the RESULT could not be sent
  no_key,        // the coordinator started TLS, this agent has no key
  key_required,  // this agent has a key and the coordinator sent plain frames
  other,
};
std::string_view to_string(ErrorCode c);

struct ErrorMsg {
  ErrorCode code{ErrorCode::other};
  std::string message;
};

// Every typed message above as (struct, decoder, MsgType): `nlohmann::json to_json(const M&)`
// and `M parse_<name>(const nlohmann::json&)`, which throws ProtocolError naming the message and
// the field. (RESULT's AgentResult is in agent_result.hpp.)
#define FABPERF_MESSAGES(X)                                 \
  X(Hello, parse_hello, hello);                             \
  X(HelloOk, parse_hello_ok, hello_ok);                     \
  X(Ping, parse_ping, ping);                                \
  X(Pong, parse_pong, pong);                                \
  X(SetupServer, parse_setup_server, setup_server);         \
  X(SetupServerOk, parse_setup_server_ok, setup_server_ok); \
  X(SetupClient, parse_setup_client, setup_client);         \
  X(SetupClientOk, parse_setup_client_ok, setup_client_ok); \
  X(Start, parse_start, start);                             \
  X(Abort, parse_abort, abort);                             \
  X(ErrorMsg, parse_error, error);                          \
  X(LinksReply, parse_links, links);                        \
  X(Shutdown, parse_shutdown, shutdown);                    \
  X(RdmaConnect, parse_rdma_connect, rdma_connect);         \
  X(RdmaConnectOk, parse_rdma_connect_ok, rdma_connect_ok)
#define FABPERF_DECLARE_MESSAGE(M, parse, type) \
  nlohmann::json to_json(const M&);             \
  M parse(const nlohmann::json&)
FABPERF_MESSAGES(FABPERF_DECLARE_MESSAGE);
#undef FABPERF_DECLARE_MESSAGE

// The "socket_limits" object of LINKS (Max: UINT64_MAX) and RESULT (1 << 48), a field decoder
// (fields.hpp): rmem_max and wmem_max up to Max, three non-negative integers each in tcp_rmem and tcp_wmem.
template <std::uint64_t Max>
SocketLimits parse_socket_limits(const Fields& f, const char* name);

// Decodes a complete frame (header + body) and validates the body against its message type;
// the fuzzer's entry point. Throws ProtocolError.
void validate_frame(std::span<const std::uint8_t> frame);

}  // namespace fabperf::proto
