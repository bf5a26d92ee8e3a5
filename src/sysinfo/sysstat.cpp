#include <fabperf/sysstat.hpp>

#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace fabperf {

CpuTimes read_cpu_times(const std::string& proc_stat) {
  std::ifstream in(proc_stat);
  std::string label;
  in >> label;
  CpuTimes t;
  if (label != "cpu") return t;
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  std::uint64_t v[8] = {};
  for (auto& x : v) {
    if (!(in >> x)) break;
  }
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.total = t.busy + v[3] + v[4];
  return t;
}

double cpu_busy_pct(const CpuTimes& a, const CpuTimes& b) noexcept {
  if (b.total <= a.total || b.busy < a.busy) return 0.0;
  return 100.0 * static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
}

std::int64_t read_tcp_retrans_segs(const std::string& proc_net_snmp) {
  std::ifstream in(proc_net_snmp);
  std::string header, values;
  while (std::getline(in, header)) {
    if (header.rfind("Tcp:", 0) != 0) continue;
    if (!std::getline(in, values)) return -1;
    std::istringstream hs(header), vs(values);
    std::string name, val;
    while (hs >> name && vs >> val) {
      if (name == "RetransSegs") {
        try {
          return std::stoll(val);
        } catch (...) {
          return -1;
        }
      }
    }
    return -1;
  }
  return -1;
}

std::int64_t process_cpu_ns() noexcept {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000'000 + tv.tv_usec * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
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

}  // namespace fabperf
