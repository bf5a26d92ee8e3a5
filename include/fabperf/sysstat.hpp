// Host counters read from /proc: CPU time (for busy %), TCP retransmitted segments. Readers take
// the root path so tests can feed captured files.
#pragma once

#include <cstdint>
#include <string>

namespace fabperf {

struct CpuTimes {
  std::uint64_t busy{0};   // user+nice+system+irq+softirq+steal, in USER_HZ ticks
  std::uint64_t total{0};  // busy + idle + iowait
};

CpuTimes read_cpu_times(const std::string& proc_stat = "/proc/stat");
// Busy share of all CPUs between two readings, in percent.
double cpu_busy_pct(const CpuTimes& before, const CpuTimes& after) noexcept;

// Tcp: RetransSegs from /proc/net/snmp; -1 when unreadable.
std::int64_t read_tcp_retrans_segs(const std::string& proc_net_snmp = "/proc/net/snmp");

// CPU time (user+system) of this process, in nanoseconds, from getrusage.
std::int64_t process_cpu_ns() noexcept;

// Raises this process's open-file soft limit to its hard limit (a coordinator holds a control
// connection, and a launcher three pipes, per agent; a server agent one socket per connection:
// the usual soft limit of 1024 runs out at a few hundred nodes). Returns the new soft limit.
std::uint64_t raise_fd_limit() noexcept;

// Host name of this machine.
std::string local_hostname();

}  // namespace fabperf
