#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
using namespace std::chrono_literals;

namespace {

// Runs f, expects a UsageError, and returns its message ("" when nothing was thrown).
template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected UsageError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected UsageError, nothing was thrown";
  return "";
}

}  // namespace

// ---- parse_size -----------------------------------------------------------------------------

TEST(ParseSize, NsdperfStyleSuffixes) {
  EXPECT_EQ(parse_size("4M", "--buffsize"), 4194304u);
  EXPECT_EQ(parse_size("256K", "--buffsize"), 262144u);
  EXPECT_EQ(parse_size("4096", "--buffsize"), 4096u);
  EXPECT_EQ(parse_size("1GiB", "--buffsize"), 1073741824u);
  EXPECT_EQ(parse_size("0.5M", "--buffsize"), 524288u);
}

TEST(ParseSize, SuffixesAreBinaryAndCaseInsensitive) {
  EXPECT_EQ(parse_size("1K", "x"), 1024u);
  EXPECT_EQ(parse_size("1k", "x"), 1024u);
  EXPECT_EQ(parse_size("1M", "x"), 1048576u);
  EXPECT_EQ(parse_size("1m", "x"), 1048576u);
  EXPECT_EQ(parse_size("1G", "x"), 1073741824u);
  EXPECT_EQ(parse_size("1g", "x"), 1073741824u);
  EXPECT_EQ(parse_size("16G", "x"), 16ull * 1024 * 1024 * 1024);
}

TEST(ParseSize, LongSpellings) {
  // nsdperf reads K/M/G as binary; the "B" and "iB" spellings mean the same thing.
  EXPECT_EQ(parse_size("4KiB", "x"), 4096u);
  EXPECT_EQ(parse_size("4KB", "x"), 4096u);
  EXPECT_EQ(parse_size("4kb", "x"), 4096u);
  EXPECT_EQ(parse_size("4MB", "x"), 4u * 1024 * 1024);
  EXPECT_EQ(parse_size("4MiB", "x"), 4u * 1024 * 1024);
  EXPECT_EQ(parse_size("2GB", "x"), 2ull * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_size("2gib", "x"), 2ull * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_size("512B", "x"), 512u);
  EXPECT_EQ(parse_size("512b", "x"), 512u);
}

TEST(ParseSize, Fractions) {
  EXPECT_EQ(parse_size("1.5K", "x"), 1536u);
  EXPECT_EQ(parse_size("0.25G", "x"), 268435456u);
  EXPECT_EQ(parse_size("2.5M", "x"), 2621440u);
  EXPECT_EQ(parse_size("0", "x"), 0u);
  EXPECT_EQ(parse_size("0K", "x"), 0u);
  // A fraction that is not a whole number of bytes is refused, not rounded.
  const auto msg = usage_error_of([] { (void)parse_size("1.5", "--socksize"); });
  EXPECT_TRUE(contains(msg, "--socksize")) << msg;
  EXPECT_TRUE(contains(msg, "whole number of bytes")) << msg;
  (void)usage_error_of([] { (void)parse_size("0.1K", "x"); });
}

TEST(ParseSize, UnknownSuffixNamesOptionAndSuffix) {
  const auto msg = usage_error_of([] { (void)parse_size("4Q", "--buffsize"); });
  EXPECT_TRUE(contains(msg, "--buffsize")) << msg;
  EXPECT_TRUE(contains(msg, "'4Q'")) << msg;
  EXPECT_TRUE(contains(msg, "'Q'")) << msg;
  EXPECT_TRUE(contains(msg, "suffix")) << msg;

  const auto msg2 = usage_error_of([] { (void)parse_size("4T", "--socksize"); });
  EXPECT_TRUE(contains(msg2, "--socksize")) << msg2;
  EXPECT_TRUE(contains(msg2, "'T'")) << msg2;

  (void)usage_error_of([] { (void)parse_size("4 M", "x"); });
  (void)usage_error_of([] { (void)parse_size("4MM", "x"); });
  (void)usage_error_of([] { (void)parse_size("4Mi", "x"); });
  (void)usage_error_of([] { (void)parse_size("4M ", "x"); });
}

TEST(ParseSize, NegativeRejected) {
  const auto msg = usage_error_of([] { (void)parse_size("-4M", "--buffsize"); });
  EXPECT_TRUE(contains(msg, "--buffsize")) << msg;
  EXPECT_TRUE(contains(msg, "negative")) << msg;
  (void)usage_error_of([] { (void)parse_size("-1", "x"); });
}

TEST(ParseSize, EmptyAndJunkRejected) {
  const auto msg = usage_error_of([] { (void)parse_size("", "--buffsize"); });
  EXPECT_TRUE(contains(msg, "--buffsize")) << msg;
  EXPECT_TRUE(contains(msg, "not a size")) << msg;
  (void)usage_error_of([] { (void)parse_size("M", "x"); });
  (void)usage_error_of([] { (void)parse_size("abc", "x"); });
  (void)usage_error_of([] { (void)parse_size(" 4M", "x"); });
  (void)usage_error_of([] { (void)parse_size("+4M", "x"); });
  (void)usage_error_of([] { (void)parse_size("nan", "x"); });
  (void)usage_error_of([] { (void)parse_size("inf", "x"); });
  (void)usage_error_of([] { (void)parse_size("infK", "x"); });
}

TEST(ParseSize, OverflowRejected) {
  const auto msg = usage_error_of([] { (void)parse_size("100000000000G", "--socksize"); });
  EXPECT_TRUE(contains(msg, "--socksize")) << msg;
  EXPECT_TRUE(contains(msg, "too large")) << msg;
  (void)usage_error_of([] { (void)parse_size("18446744073709551616", "x"); });  // 2^64
  (void)usage_error_of([] { (void)parse_size("1e300", "x"); });
  (void)usage_error_of([] { (void)parse_size("1e400", "x"); });  // not even a finite double
  // The largest accepted values still convert exactly.
  EXPECT_EQ(parse_size("1000000000000000000", "x"), 1000000000000000000ull);
  EXPECT_EQ(parse_size("1048576G", "x"), 1ull << 50);
}

// ---- parse_duration -------------------------------------------------------------------------

TEST(ParseDuration, PlainSecondsAndFractions) {
  EXPECT_EQ(parse_duration("10", "--time"), 10s);
  EXPECT_EQ(parse_duration("2.5", "--time"), 2500ms);
  EXPECT_EQ(parse_duration("0", "--time"), 0s);
  EXPECT_EQ(parse_duration("0.2", "--time"), 200ms);
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(parse_duration("10s", "x"), 10s);
  EXPECT_EQ(parse_duration("10S", "x"), 10s);
  EXPECT_EQ(parse_duration("500ms", "x"), 500ms);
  EXPECT_EQ(parse_duration("1.5ms", "x"), 1500us);
  EXPECT_EQ(parse_duration("250us", "x"), 250us);
  EXPECT_EQ(parse_duration("1m", "x"), 60s);
  EXPECT_EQ(parse_duration("1min", "x"), 60s);
  EXPECT_EQ(parse_duration("1.5m", "x"), 90s);
  EXPECT_EQ(parse_duration("1h", "x"), 3600s);
  EXPECT_EQ(parse_duration("0.5h", "x"), 1800s);
  EXPECT_EQ(parse_duration("168h", "x"), std::chrono::hours(168));
}

TEST(ParseDuration, NegativeRejected) {
  const auto msg = usage_error_of([] { (void)parse_duration("-1", "--time"); });
  EXPECT_TRUE(contains(msg, "--time")) << msg;
  EXPECT_TRUE(contains(msg, "negative")) << msg;
  (void)usage_error_of([] { (void)parse_duration("-5ms", "--warmup"); });
}

TEST(ParseDuration, JunkRejected) {
  const auto msg = usage_error_of([] { (void)parse_duration("10x", "--time"); });
  EXPECT_TRUE(contains(msg, "--time")) << msg;
  EXPECT_TRUE(contains(msg, "'x'")) << msg;
  const auto msg2 = usage_error_of([] { (void)parse_duration("", "--cooldown"); });
  EXPECT_TRUE(contains(msg2, "--cooldown")) << msg2;
  EXPECT_TRUE(contains(msg2, "not a duration")) << msg2;
  (void)usage_error_of([] { (void)parse_duration("s", "x"); });
  (void)usage_error_of([] { (void)parse_duration("ten", "x"); });
  (void)usage_error_of([] { (void)parse_duration("10 s", "x"); });
  (void)usage_error_of([] { (void)parse_duration("10sec", "x"); });
  (void)usage_error_of([] { (void)parse_duration("10d", "x"); });
  (void)usage_error_of([] { (void)parse_duration("nan", "x"); });
  (void)usage_error_of([] { (void)parse_duration("inf", "x"); });
}

TEST(ParseDuration, TooLongRejected) {
  const auto msg = usage_error_of([] { (void)parse_duration("100000000", "--time"); });
  EXPECT_TRUE(contains(msg, "--time")) << msg;
  EXPECT_TRUE(contains(msg, "too long")) << msg;
  (void)usage_error_of([] { (void)parse_duration("3000h", "x"); });
  (void)usage_error_of([] { (void)parse_duration("1e300", "x"); });
  EXPECT_EQ(parse_duration("10000000", "x"), std::chrono::seconds(10000000));
}

// ---- parse_int ------------------------------------------------------------------------------

TEST(ParseInt, InRange) {
  EXPECT_EQ(parse_int("1", "--threads", 1, 4096), 1);
  EXPECT_EQ(parse_int("4096", "--threads", 1, 4096), 4096);
  EXPECT_EQ(parse_int("-5", "x", -10, 10), -5);
  EXPECT_EQ(parse_int("0", "x", 0, 0), 0);
  const auto mx = std::numeric_limits<std::int64_t>::max();
  const auto mn = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(parse_int("9223372036854775807", "x", mn, mx), mx);
  EXPECT_EQ(parse_int("-9223372036854775808", "x", mn, mx), mn);
}

TEST(ParseInt, OutOfRangeNamesOptionValueAndBounds) {
  const auto msg = usage_error_of([] { (void)parse_int("4097", "--threads", 1, 4096); });
  EXPECT_TRUE(contains(msg, "--threads")) << msg;
  EXPECT_TRUE(contains(msg, "4097")) << msg;
  EXPECT_TRUE(contains(msg, "1..4096")) << msg;
  (void)usage_error_of([] { (void)parse_int("0", "--threads", 1, 4096); });
  (void)usage_error_of([] { (void)parse_int("-1", "x", 0, 10); });
}

TEST(ParseInt, NotANumber) {
  const auto msg = usage_error_of([] { (void)parse_int("12a", "--parallel", 1, 10); });
  EXPECT_TRUE(contains(msg, "--parallel")) << msg;
  EXPECT_TRUE(contains(msg, "not a whole number")) << msg;
  (void)usage_error_of([] { (void)parse_int("", "x", 0, 10); });
  (void)usage_error_of([] { (void)parse_int("1.0", "x", 0, 10); });
  (void)usage_error_of([] { (void)parse_int(" 1", "x", 0, 10); });
  (void)usage_error_of([] { (void)parse_int("+1", "x", 0, 10); });
  (void)usage_error_of([] { (void)parse_int("0x10", "x", 0, 100); });
  // Overflowing int64 is "not a whole number" rather than wrapping around.
  (void)usage_error_of([] { (void)parse_int("9223372036854775808", "x", 0, 10); });
  (void)usage_error_of([] { (void)parse_int("99999999999999999999", "x", 0, 10); });
}

// ---- format_size ----------------------------------------------------------------------------

TEST(FormatSize, WholeMultiplesUseSuffixes) {
  EXPECT_EQ(format_size(4194304), "4M");
  EXPECT_EQ(format_size(262144), "256K");
  EXPECT_EQ(format_size(1024), "1K");
  EXPECT_EQ(format_size(1073741824), "1G");
  EXPECT_EQ(format_size(3ull << 30), "3G");
  EXPECT_EQ(format_size(1536ull << 20), "1536M");  // 1.5G is not a whole number of G
  EXPECT_EQ(format_size(1025ull * 1024), "1025K");
}

TEST(FormatSize, OtherSizesInBytes) {
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1), "1");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(1023), "1023");
  EXPECT_EQ(format_size(1025), "1025");
  EXPECT_EQ(format_size(4194305), "4194305");
}

TEST(FormatSize, RoundTripsThroughParseSize) {
  for (std::uint64_t v : {std::uint64_t{4096}, std::uint64_t{1} << 20, std::uint64_t{16} << 20, std::uint64_t{12345},
                          std::uint64_t{3} << 30, std::uint64_t{100} << 20}) {
    EXPECT_EQ(parse_size(format_size(v), "x"), v) << format_size(v);
  }
}

// ---- rates ----------------------------------------------------------------------------------

TEST(Rates, MegabyteIsTenToTheSixth) {
  EXPECT_DOUBLE_EQ(kBytesPerMB, 1e6);
  EXPECT_DOUBLE_EQ(mb_per_s(1'000'000, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(mb_per_s(2'354'000'000ull * 8, 8.0), 2354.0);
  EXPECT_DOUBLE_EQ(mb_per_s(1'048'576, 1.0), 1.048576);  // 1 MiB is not 1 MB
  EXPECT_DOUBLE_EQ(mb_per_s(5'000'000, 0.5), 10.0);
}

TEST(Rates, GigabitPerSecond) {
  EXPECT_DOUBLE_EQ(gbit_per_s(125'000'000, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(gbit_per_s(12'500'000'000ull, 10.0), 10.0);
  // 1 MB/s == 0.008 Gbit/s.
  EXPECT_DOUBLE_EQ(gbit_per_s(1'000'000, 1.0), 0.008);
}

TEST(Rates, ZeroOrNegativeTimeGivesZero) {
  EXPECT_EQ(mb_per_s(1'000'000, 0.0), 0.0);
  EXPECT_EQ(mb_per_s(1'000'000, -1.0), 0.0);
  EXPECT_EQ(gbit_per_s(1'000'000, 0.0), 0.0);
  EXPECT_EQ(gbit_per_s(1'000'000, -1.0), 0.0);
  EXPECT_EQ(mb_per_s(0, 1.0), 0.0);
}

TEST(Columns, KeysHeadersAndUnits) {
  EXPECT_EQ(col::mb_per_s.key, "mb_per_s");
  EXPECT_EQ(col::mb_per_s.header, "MB/s");
  EXPECT_EQ(col::mb_per_s.unit, "10^6 B/s");
  EXPECT_EQ(col::gbit_per_s.unit, "10^9 bit/s");
  EXPECT_EQ(col::p999_us.header, "p99.9 us");
}
