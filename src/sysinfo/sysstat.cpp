#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/sysstat.hpp>
#include "sysinfo/file_read.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <cerrno>
#include <vector>

namespace fabperf {

CpuTimes read_cpu_times(const std::string& proc_stat) {
  const auto w = sysfs::words(sysfs::read_line(proc_stat));
  CpuTimes t;
  if (w.empty() || w[0] != "cpu") return t;
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  std::uint64_t v[8] = {};
  for (std::size_t i = 0; i < 8 && i + 1 < w.size(); ++i) v[i] = sysfs::to_u64(w[i + 1]).value_or(0);
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.total = t.busy + v[3] + v[4];
  return t;
}

double cpu_busy_pct(const CpuTimes& a, const CpuTimes& b) noexcept {
  if (b.total <= a.total || b.busy < a.busy) return 0.0;
  return 100.0 * static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
}

std::int64_t process_cpu_ns() noexcept {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) { return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000'000 + tv.tv_usec * 1000; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw SystemError("readlink", "/proc/self/exe", errno);
  return std::string(buf, static_cast<std::size_t>(n));
}

std::uint64_t raise_fd_limit() noexcept {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
  }
  return static_cast<std::uint64_t>(r.rlim_cur);
}

std::map<std::string, std::string> read_arp_table(std::string_view dev, const std::string& root) {
  std::map<std::string, std::string> arp;
  const auto lines = split_list(sysfs::read_all(root + "/proc/net/arp"), '\n');
  for (std::size_t i = 1; i < lines.size(); ++i) {  // after the header: IP, HW type, flags, MAC, mask, device
    const auto w = sysfs::words(lines[i]);
    if (w.size() >= 6 && w[5] == dev) arp[w[0]] = w[3];
  }
  return arp;
}

std::int64_t parse_task_stat_ticks(std::string_view line) {
  const auto close = line.rfind(')');
  if (close == std::string_view::npos || close + 2 > line.size()) return -1;
  // Fields after the name start at 3 (state); utime and stime are 14 and 15.
  const auto w = sysfs::words(line.substr(close + 2));
  const std::int64_t utime = w.size() > 12 ? sysfs::to_i64(w[11], -1) : -1;
  const std::int64_t stime = w.size() > 12 ? sysfs::to_i64(w[12], -1) : -1;
  return utime < 0 || stime < 0 ? -1 : utime + stime;
}

double read_thread_cpu_s(int tid, const std::string& root) {
  const std::int64_t ticks =
      parse_task_stat_ticks(sysfs::read_line(root + "/proc/self/task/" + std::to_string(tid) + "/stat"));
  return ticks < 0 ? -1 : static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::vector<int> read_numa_cpus(int node, const std::string& root) {
  if (node < 0) return {};
  return sysfs::to_cpus(sysfs::read_line(root + "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist"));
}

}  // namespace fabperf
