// The counter dictionary: driver-specific counter names -> categories, one ordered table (the
// first matching row wins). Names come from the drivers' own documentation and ethtool string
// tables (mlx5 counters.rst, ice_ethtool.c, i40e_ethtool.c, bnxt_ethtool.c, ixgbe_ethtool.c,
// virtio_net.c, veth.c, rxe_hw_counters.c, mlx5_ib counters.c, the IB PMA sysfs names) and
// the kernel's MIB names (/proc/net/snmp, /proc/net/netstat). docs/counters.md lists them.
#include <fabperf/sysinfo/counters.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace fabperf {
namespace {

using C = CounterCategory;

// Pattern syntax: '*' any run of characters, '#' a run of digits (the priority); everything else literal.
struct Row {
  std::string_view pattern;
  CounterCategory category;
};

// NOLINTBEGIN: a table reads best one row a line
constexpr std::array kRows{
    // -- settings and identifiers that look like counters ----------------------------------
    Row{"peer_ifindex", C::other},                // veth: the peer's index
    Row{"hw_counters/lifespan", C::other},        // rxe: a setting
    Row{"*ack_deferred", C::other},               // rxe: the completer rescheduled (not "*err*")
    Row{"*pause_duration*", C::other},            // mlx5: microseconds, not frames
    Row{"rx_buffer_passed_thres_phy", C::other},  // mlx5: a fill-level event
    // -- flow control: PFC per priority, global pause, IB credit waits -----------------------
    Row{"*prio#_pause*", C::pause},    // mlx5 rx_prio3_pause, tx_prio3_pause(_transition)
    Row{"*pause_ctrl_phy", C::pause},  // mlx5 global pause
    Row{"*pause_storm*", C::pause},    // mlx5 tx_pause_storm_{warning,error}_events
    Row{"*global_pause*", C::pause},
    Row{"*priority_#_xo*", C::pause},            // ice rx_priority_3_xoff.nic, i40e port.rx_priority_3_xoff(_rx)
    Row{"*link_xo*", C::pause},                  // ice link_xoff_rx.nic, i40e port.link_xoff_rx
    Row{"*pfc_ena_frames_pri#", C::pause},       // bnxt_en rx_pfc_ena_frames_pri3
    Row{"*pfc_xon2xoff_frames_pri#", C::pause},  // bnxt_en
    Row{"*pfc_frames", C::pause},                // bnxt_en rx_pfc_frames
    Row{"*pause_frames", C::pause},              // bnxt_en rx_pause_frames
    Row{"*pause_events", C::pause},              // bnxt_en continuous_(roce_)pause_events
    Row{"*pb_#_pxo*", C::pause},                 // ixgbe rx_pb_3_pxoff
    Row{"*flow_control_xo*", C::pause},          // ixgbe rx_flow_control_xoff
    Row{"counters/port_xmit_wait", C::pause},    // IB PMA: ticks waiting for credits
    // -- ECN marks and RoCE congestion notification ------------------------------------------
    Row{"*ecn_mark*", C::ecn},  // mlx5_ib np_ecn_marked_roce_packets, NIC ecn_marked
    Row{"IpExt.InCEPkts", C::ecn}, Row{"TcpExt.TCPDeliveredCE", C::ecn},
    Row{"*cnp*", C::cnp},  // mlx5_ib np_cnp_sent, rp_cnp_handled, rp_cnp_ignored
    // -- forward error correction -------------------------------------------------------------
    Row{"*fec_uncorrect*", C::fec_uncorrected},  // bnxt_en rx_fec_uncorrectable_blocks, mlx5 *_phy
    Row{"*fec_corrected*", C::fec_corrected},    // bnxt_en rx_fec_corrected_blocks
    Row{"*corrected_bits*", C::fec_corrected},   // mlx5 rx_corrected_bits_phy, bnxt_en rx_corrected_bits
    Row{"rx_err_lane_*_phy", C::fec_corrected},  // mlx5: corrected bits per lane
    // -- damaged frames -------------------------------------------------------------------------
    Row{"*crc_err*", C::crc},              // mlx5 rx_crc_errors_phy, ixgbe rx_crc_errors, ice .nic, i40e port.
    Row{"*fcs_err*", C::crc},              // bnxt_en rx_fcs_err_frames
    Row{"*symbol_err*", C::crc},           // mlx5 rx_symbol_err_phy, rx_pcs_symbol_err_phy, bnxt_en
    Row{"counters/symbol_error", C::crc},  // IB PMA
    Row{"counters/port_rcv_errors", C::crc}, Row{"counters/port_rcv_remote_physical_errors", C::crc},
    Row{"*align_err*", C::crc},      // bnxt_en rx_align_err_frames
    Row{"*illegal_bytes*", C::crc},  // ice illegal_bytes.nic, i40e port.illegal_bytes
    Row{"*icrc*", C::crc},           // mlx5_ib rx_icrc_encapsulated
    // -- the link going down ----------------------------------------------------------------------
    Row{"*link_down*", C::link_down},            // mlx5 link_down_events_phy, ice tx_dropped_link_down.nic
    Row{"*link_downed", C::link_down},           // IB PMA counters/link_downed, rxe hw_counters/link_downed
    Row{"*link_error_recovery", C::link_down},   // IB PMA
    Row{"*mac_*_faults*", C::link_down},         // ice/i40e mac_local_faults, mac_remote_faults
    Row{"if.carrier_down_count", C::link_down},  // sysfs: carrier lost
    // -- timeouts -------------------------------------------------------------------------------
    Row{"*tx_timeout*", C::error},          // the netdev watchdog: a stuck queue
    Row{"TcpExt.TCPTimeouts", C::timeout},  // TCP RTOs
    Row{"TcpExt.TCPSpuriousRTOs", C::timeout}, Row{"*local_ack_timeout*", C::timeout},  // mlx5_ib local_ack_timeout_err
    Row{"*retrans_to", C::timeout},                                                     // mlx5_ib roce_adp_retrans_to
    // -- retransmits and out-of-sequence arrivals ---------------------------------------------
    Row{"Tcp.RetransSegs", C::retransmit}, Row{"TcpExt.TCPLostRetransmit", C::retransmit},
    Row{"TcpExt.TCPFastRetrans", C::retransmit}, Row{"TcpExt.TCPSlowStartRetrans", C::retransmit},
    Row{"*retry_exceeded_err", C::error},        // rxe: a queue pair gave up
    Row{"*rnr*", C::error},                      // receiver not ready (rxe, mlx5_ib)
    Row{"*completer_retry_err", C::retransmit},  // rxe: the requester retried
    Row{"*out_of_seq*", C::retransmit},          // rxe out_of_seq_request, mlx5_ib out_of_sequence
    Row{"*seq_err", C::retransmit},              // rxe rcvd_seq_err, mlx5_ib packet_seq_err, implied_nak_seq_err
    Row{"*duplicate_request", C::retransmit},    // rxe, mlx5_ib: the peer resent
    Row{"*retrans*", C::retransmit},             // mlx5_ib roce_adp_retrans
    Row{"*slow_restart*", C::retransmit},        // mlx5_ib roce_slow_restart
    // -- discards: no buffer, policy, queue full ------------------------------------------------
    Row{"*discard*cos#", C::discard},        // bnxt_en rx_discard_packets_cos3
    Row{"*prio#_discards", C::discard},      // mlx5 rx_prio3_discards
    Row{"*discard*", C::discard},            // mlx5 rx_discards_phy, IB port_xmit_discards
    Row{"*out_of_buffer*", C::discard},      // mlx5 rx_out_of_buffer, mlx5_ib out_of_buffer
    Row{"*no_buffer*", C::discard},          // ixgbe rx_no_buffer_count
    Row{"*no_dma_resources*", C::discard},   // i40e/ice rx_no_dma_resources
    Row{"*missed_errors*", C::discard},      // ixgbe rx_missed_errors: FIFO full
    Row{"*buffer_overrun*", C::discard},     // IB excessive_buffer_overrun_errors
    Row{"*constraint_errors*", C::discard},  // IB port_{rcv,xmit}_constraint_errors
    Row{"TcpExt.ListenOverflows", C::discard}, Row{"Udp.RcvbufErrors", C::discard}, Row{"Udp.SndbufErrors", C::discard},
    Row{"*drop*", C::discard},  // veth/virtio rx_queue_0_drops, qdisc.drops, softnet.dropped, if.*_dropped
    Row{"*Drop*", C::discard},  // TcpExt.ListenDrops, TCPBacklogDrop, TCPRcvQDrop
    // -- other errors ---------------------------------------------------------------------------
    Row{"*err*", C::error},  // length, undersize, jabber, cqe errors, Tcp.InErrs, ...
    Row{"*Err*", C::error}, Row{"*jabber*", C::error}, Row{"*jbr*", C::error},  // bnxt_en rx_jbr_frames
    Row{"*ovrsz*", C::error},                                                   // bnxt_en rx_ovrsz_frames
    Row{"*undrsz*", C::error},                                                  // bnxt_en rx_undrsz_frames
    Row{"*runt*", C::error},                                                    // bnxt_en rx_runt_frames
    Row{"*undersize*", C::error}, Row{"*oversize*", C::error}, Row{"*fragments*", C::error},
    Row{"*alloc_fail*", C::error},
    // -- traffic --------------------------------------------------------------------------------
    Row{"*bytes*", C::traffic}, Row{"*packets*", C::traffic}, Row{"*pkts*", C::traffic},
    Row{"*Pkts*", C::traffic},                               // IpExt.InECT0Pkts
    Row{"*frames*", C::traffic}, Row{"*_data", C::traffic},  // IB port_xmit_data (4-byte words)
    Row{"*requests", C::traffic},                            // mlx5_ib rx_write_requests
    Row{"*rdma_sends", C::traffic}, Row{"*rdma_recvs", C::traffic}, Row{"*xdp_xmit", C::traffic},
    Row{"*xdp_tx", C::traffic}, Row{"*xdp_redirect*", C::traffic},
    Row{"*kicks", C::traffic},  // virtio_net tx_queue_0_kicks
};
// NOLINTEND

// '*' any run, '#' one or more digits (the first run captured into *digits).
bool match(std::string_view p, std::string_view s, int* digits) {
  while (!p.empty()) {
    if (p[0] == '*') {
      for (std::size_t i = 0; i <= s.size(); ++i) {
        if (match(p.substr(1), s.substr(i), digits)) return true;
      }
      return false;
    }
    if (p[0] == '#') {
      std::size_t n = 0;
      while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
      if (n == 0) return false;
      // A digit run is matched whole: "prio1#" style patterns do not exist, so no backtracking.
      if (digits && *digits < 0 && n <= 3) *digits = std::stoi(std::string(s.substr(0, n)));
      p.remove_prefix(1);
      s.remove_prefix(n);
      continue;
    }
    if (s.empty() || s[0] != p[0]) return false;
    p.remove_prefix(1);
    s.remove_prefix(1);
  }
  return s.empty();
}

std::string direction_of(std::string_view name) {
  for (const std::string_view strip : {"port.", "counters/", "hw_counters/", "if."}) {
    if (name.substr(0, strip.size()) == strip) name.remove_prefix(strip.size());
  }
  auto has = [&](std::string_view x) { return name.find(x) != std::string_view::npos; };
  if (name.substr(0, 2) == "rx" || has("_rx") || has("port_rcv") || has("rcvd") || has("np_")) return "rx";
  if (name.substr(0, 2) == "tx" || has("_tx") || has("port_xmit") || has("sent") || has("rp_")) return "tx";
  return "";
}

// Each category's name in JSON and KPIs, and in the words of a diagnosis: row i is the enum's value i.
struct CategoryNames {
  std::string_view key;
  std::string_view words;
};
constexpr std::array<CategoryNames, static_cast<std::size_t>(C::other) + 1> kCategoryNames{{
    {"pause", "pause"},
    {"discard", "discard"},
    {"ecn", "ECN mark"},
    {"cnp", "CNP"},
    {"fec_corrected", "FEC corrected"},
    {"fec_uncorrected", "FEC uncorrected"},
    {"crc", "CRC/symbol error"},
    {"link_down", "link down"},
    {"retransmit", "retransmit"},
    {"timeout", "timeout"},
    {"error", "error"},
    {"traffic", "traffic"},
    {"other", "unclassified"},
}};
static_assert(kCategoryNames.back().key == "other", "kCategoryNames: one row per CounterCategory, in the enum's order");

const CategoryNames& names_of(CounterCategory c) {
  const auto i = static_cast<std::size_t>(c);
  return i < kCategoryNames.size() ? kCategoryNames[i] : kCategoryNames.back();
}

}  // namespace

std::string_view to_string(CounterCategory c) {
  return names_of(c).key;
}

std::optional<CounterCategory> counter_category_from_string(std::string_view s) {
  const auto it = std::ranges::find(kCategoryNames, s, &CategoryNames::key);
  return it != kCategoryNames.end() ? std::optional(static_cast<C>(it - kCategoryNames.begin())) : std::nullopt;
}

const std::vector<CounterCategory>& symptom_categories() {
  static const std::vector<CounterCategory> v{
      C::link_down, C::fec_uncorrected, C::crc,        C::pause,         C::discard, C::ecn,
      C::cnp,       C::timeout,         C::retransmit, C::fec_corrected, C::error};
  return v;
}

std::string_view describe(CounterCategory c) {
  return names_of(c).words;
}

CounterClass classify_counter(std::string_view name) {
  CounterClass out;
  for (const auto& r : kRows) {
    int digits = -1;
    if (!match(r.pattern, name, &digits)) continue;
    out.category = r.category;
    if (digits >= 0 && digits <= 15) out.priority = digits;
    break;
  }
  out.direction = direction_of(name);
  return out;
}

std::string counter_label(std::string_view name) {
  const CounterClass c = classify_counter(name);
  if (c.category == C::traffic || c.category == C::other) return "";
  std::string label = c.category == C::pause && c.priority >= 0 ? "PFC" : std::string(describe(c.category));
  if (c.priority >= 0) label += ", priority " + std::to_string(c.priority);
  return label;
}

}  // namespace fabperf
