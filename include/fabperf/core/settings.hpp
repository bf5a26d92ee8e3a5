// The one table of test settings. Every setting of a test (what becomes a TestSpec) is declared
// here once: its name (the command-line option and the plan-file key), nsdperf's name for it,
// its help text and default, and its parser. From the table come the `fabperf run` options and
// their mapping, the plan file's keys, the shell's `set` command, the refusals of modes where a
// setting cannot apply ("--verify: not with a plan file"), the spec's JSON codec (the control
// protocol and a result's "settings"), the man page and the docs table (`fabperf settings
// --markdown`). A setting added here reaches every mode and the wire, or is refused there by
// name: nothing is dropped silently.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include <fabperf/core/spec.hpp>

namespace fabperf {

class Fields;

enum class SettingKind {
  flag,   // on the command line a bare switch; in a plan a boolean; in the shell on|off
  value,  // takes a value (text on the command line and in the shell; string or number in a plan)
};

// A setting's part of the spec's JSON. encode writes its key (and, for a few, a companion key
// kept for older readers); decode reads them back into parameters, checking JSON types and what
// fits the C++ type. Ranges are TestSpec::make's alone, which every decoded spec goes through.
// A key from protocol 1's first release is required; one added since is optional (absent: the
// default), so an older coordinator's spec still decodes.
struct SettingCodec {
  void (*encode)(const TestSpec& s, nlohmann::json& j, const char* key);
  void (*decode)(const Fields& f, SpecParams& p, const char* key);
  // Whether the parameters carry a value for it (the user gave it).
  bool (*given)(const SpecParams& p);
};

struct Setting {
  const char* name;   // `fabperf run --NAME`, plan key NAME, shell `set NAME`
  const char* key;    // its key in the spec's JSON (a result's "settings")
  const char* group;  // the --help section: test, tuning, rdma, bonding
  SettingKind kind;
  const char* value;    // what the value looks like ("SIZE", "N", "SECONDS"); "" for flags
  const char* deflt;    // the default in words, for help and docs
  const char* nsdperf;  // nsdperf's command for it ("" none)
  const char* help;
  // The transport it applies to: "tcp", "rdma", or "" for both. Given for another transport,
  // it is refused (refuse_inapplicable), never carried along unused.
  const char* only;
  // Parses `text` into the parameters; a flag gets "true" or "false". Errors are UsageErrors
  // that name `what` (the option, or "value" where the caller names the field itself).
  void (*apply)(SpecParams& p, std::string_view text, std::string_view what);
  SettingCodec wire;
  [[nodiscard]] bool given(const SpecParams& p) const { return wire.given(p); }
};

// Every test setting, in help order.
std::span<const Setting> spec_settings();
// nullptr when `name` is not a test setting.
const Setting* find_setting(std::string_view name);

// Throws UsageError naming the first setting given that the test's transport does not use
// ("--qdepth: RDMA only (this test's transport is tcp)"). Every place that turns user input into
// SpecParams calls it: the command line, plan files, the shell.
void refuse_inapplicable(const SpecParams& p);

// The settings of a run beside its test's (not in the spec): its sampling interval and how a
// pattern or a host's links become steps. Declared once, for `fabperf run --NAME` and plan KEYs.
struct RunParams {
  std::chrono::nanoseconds interval{std::chrono::seconds(1)};
  std::uint32_t concurrent_pairs{1};
  std::uint32_t ring_k{1};
  bool per_link_sequential{false};
};
struct RunSetting {
  const char* name;   // `fabperf run --NAME`
  const char* key;    // its plan key
  const char* group;  // the --help section
  const char* deflt;  // the default, as the option's text
  const char* help;
  // Parses `text` into p, checking its range; errors as Setting::apply's.
  void (*apply)(RunParams& p, std::string_view text, std::string_view what);
};
// --interval, --concurrent-pairs, --ring-k (plan key k) and --per-link, in help order.
std::span<const RunSetting> run_settings();

// The docs table (Markdown): name, nsdperf, default, what it does, where it applies.
std::string settings_markdown();

}  // namespace fabperf
