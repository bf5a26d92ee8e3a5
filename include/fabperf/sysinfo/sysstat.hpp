// Host counters read from /proc: CPU time (for busy %), this process's CPU time. Readers take
// the root path so tests can feed captured files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fabperf {

struct CpuTimes {
  std::uint64_t busy{0};   // user+nice+system+irq+softirq+steal, in USER_HZ ticks
  std::uint64_t total{0};  // busy + idle + iowait
};

CpuTimes read_cpu_times(const std::string& proc_stat = "/proc/stat");
// Busy share of all CPUs between two readings, in percent.
double cpu_busy_pct(const CpuTimes& before, const CpuTimes& after) noexcept;

// CPU time (user+system) of this process, in nanoseconds, from getrusage.
std::int64_t process_cpu_ns() noexcept;

// Raises this process's open-file soft limit to its hard limit (a coordinator holds a control
// connection, and a launcher three pipes, per agent; a server agent one socket per connection:
// the usual soft limit of 1024 runs out at a few hundred nodes). Returns the new soft limit.
std::uint64_t raise_fd_limit() noexcept;

// The ARP table's IPv4 neighbours on one device: address -> MAC (/proc/net/arp; its header line
// and other devices' entries are skipped).
std::map<std::string, std::string> read_arp_table(std::string_view dev, const std::string& root = "");

// user+system clock ticks of a /proc/PID/task/TID/stat line; -1 when it does not parse (the
// thread's name may hold spaces and parentheses: fields are counted after the last ')').
std::int64_t parse_task_stat_ticks(std::string_view line);
// CPU time of one of this process's threads, in seconds; -1 when it is gone.
double read_thread_cpu_s(int tid, const std::string& root = "");

// The CPUs of a NUMA node (/sys/devices/system/node/nodeN/cpulist); empty when unknown.
std::vector<int> read_numa_cpus(int node, const std::string& root = "");

std::string local_hostname();
// The running executable (/proc/self/exe), to start agents as copies of this binary; throws SystemError.
std::string self_exe();

}  // namespace fabperf
