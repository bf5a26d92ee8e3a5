// Reading the small text files of /sys and /proc, the one way every sysinfo module does it: a
// missing or unreadable file is an absent value (an empty string or nullopt), never an
// exception, because drivers and kernels differ in which files they offer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/sysinfo/links.hpp>

namespace fabperf {
class Fields;
}

namespace fabperf::sysfs {

// Leading blanks and trailing blanks and line ends removed.
std::string trim(std::string_view s);
// The first line of a file, trimmed; "" when the file is absent or empty.
std::string read_line(const std::string& path);
// The whole file; "" when it is absent.
std::string read_all(const std::string& path);
// The first line as a non-negative decimal integer; nullopt when absent, not a number or too big.
std::optional<std::uint64_t> read_u64(const std::string& path);
// s as a non-negative decimal integer, digits only (a file's or a folder's name: "12").
std::optional<std::uint64_t> to_u64(const std::string& s);
// The first line as an int; fallback when it is none.
int read_int(const std::string& path, int fallback);
// An interface's speed file in Mb/s; -1 when unknown (a virtual link's "-1", or unreadable: EINVAL).
std::int64_t read_speed(const std::string& path);
// The decimal integer s starts with (after blanks, as strtoll reads it); fallback when there is
// none or it does not fit (to_int: in an int).
std::int64_t to_i64(const std::string& s, std::int64_t fallback);
int to_int(const std::string& s, int fallback);
// The words of s between any of `seps` (blanks by default), empty ones left out.
std::vector<std::string> words(std::string_view s, std::string_view seps = " \t\r\n");
// A cpulist ("0-3,8"); none when it is empty or does not parse.
std::vector<int> to_cpus(const std::string& list);
// The names in a folder, sorted; none when it is absent.
std::vector<std::string> sorted_entries(const std::filesystem::path& dir);

// Where sysfs has no answer: ETHTOOL_GDRVINFO and GSET on a live interface of this host fill the
// driver, speed and duplex that `l` does not know yet (in counters.cpp, beside the other ethtool
// ioctls).
void fill_from_ethtool(LinkInfo& l);

// Decoders of the inventories' JSON (fields.hpp): a speed in Mb/s, null when unknown (-1 here),
// else in [0, 10^8]; a PCIe link, null (or absent: older agents) when there is none.
std::int64_t mbps_field(const Fields& f, const char* name);
std::optional<PcieInfo> pcie_field(const Fields& f, const char* name);

}  // namespace fabperf::sysfs
