#include "cli/options.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <iostream>

namespace fabperf::cli {

cxxopts::ParseResult parse_options(cxxopts::Options& opts, int argc, char** argv,
                                   const std::vector<std::string>& positional, const std::string& usage,
                                   const std::vector<std::string>& groups) {
  if (!positional.empty()) {
    opts.parse_positional(positional);
    opts.positional_help(usage);
  }
  try {
    auto r = opts.parse(argc, argv);
    if (!r.unmatched().empty()) throw UsageError(fmt::format("unexpected argument '{}'", r.unmatched().front()));
    if (r.count("help")) {
      std::cout << opts.help(groups);
      throw HelpShown{};
    }
    return r;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("fabperf");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw UsageError(fmt::format("--log-level '{}': unknown level (trace, debug, info, warn, error, off)", level));
  }
  spdlog::set_level(lvl);
}

std::string key_file_option(const cxxopts::ParseResult& r) {
  if (r.count("key-file")) {
    auto path = get<std::string>(r, "key-file");
    if (path.empty()) throw UsageError("--key-file: empty path");
    return path;
  }
  return auth::key_file_from_env();
}

void add_common_options(cxxopts::Options& o, int which, const std::string& group) {
  auto add = o.add_options(group);
  add("h,help", "this help");
  if (which & kKeyFile)
    add("key-file", "shared key (from 'fabperf keygen') to prove to the agents. Default: $FABPERF_KEY_FILE",
        cxxopts::value<std::string>());
  if (which & kConnectTimeout)
    add("connect-timeout", "seconds to wait for each agent", cxxopts::value<std::string>()->default_value("5"));
  if (which & kLogLevel)
    add("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("warn"));
}

auth::Key key_option(const cxxopts::ParseResult& r) {
  const std::string path = key_file_option(r);
  return path.empty() ? auth::Key{} : auth::load_key_file(path);
}

std::chrono::milliseconds connect_timeout_option(const cxxopts::ParseResult& r, bool at_least_100ms) {
  const auto t = std::chrono::duration_cast<std::chrono::milliseconds>(
      parse_duration(get<std::string>(r, "connect-timeout"), "--connect-timeout"));
  if (at_least_100ms && t < std::chrono::milliseconds(100))
    throw UsageError("--connect-timeout: must be at least 0.1 s");
  return t;
}

std::vector<HostPort> host_list(const std::string& text, const char* what) {
  std::vector<HostPort> out;
  for (const auto& item : split_list(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{} '{}': empty host in the list", what, text));
    HostPort hp = parse_host_port(item, what);
    if (hp.port == 0) throw UsageError(fmt::format("{} '{}': port 0 is not an agent's port", what, item));
    if (const char* why = resolve_error(hp.host))
      throw UsageError(fmt::format("{} '{}': host does not resolve ({})", what, hp.host, why));
    if (std::ranges::any_of(out, [&](const HostPort& x) { return x.host == hp.host && x.port == hp.port; }))
      throw UsageError(fmt::format("{}: {} is listed twice", what, hp.str()));
    out.push_back(std::move(hp));
  }
  return out;
}

}  // namespace fabperf::cli
