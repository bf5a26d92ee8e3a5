#include <fabperf/report/result_stream.hpp>

#include <fabperf/core/error.hpp>

#include "report/result_json.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <iterator>

namespace fabperf {

using nlohmann::json;

namespace {

// v as json::dump(2) writes it, every line after the first shifted right by `by` spaces: the
// value sits at that depth of the document. (Strings never hold a raw newline: dump escapes it.)
std::string indented(const json& v, int by) {
  std::string out;
  for (const char c : v.dump(2)) {
    out += c;
    if (c == '\n') out.append(static_cast<std::size_t>(by), ' ');
  }
  return out;
}

std::string member(const std::string& key, const json& v) {
  return "  " + json(key).dump() + ": " + indented(v, 2);
}

// One element of a list at depth 2 (nodes, connections, pairs), after a comma unless it is the first.
std::string element(bool& first, const json& v) {
  const char* sep = first ? "\n    " : ",\n    ";
  first = false;
  return sep + indented(v, 4);
}

// An unlinked file in the results file's directory (same file system as the result), else in
// the system's temporary directory.
std::FILE* open_spool(const std::string& path) {
  if (!path.empty() && path != "-") {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (std::FILE* f = ::fdopen(fd, "w+")) return f;
      ::close(fd);
    }
  }
  return std::tmpfile();
}

// A balance-alb bond's notes need every peer's result: its node's section is written last.
bool needs_peer_results(const NodeReport& n) {
  return std::any_of(n.bonds.begin(), n.bonds.end(), [](const BondReport& b) { return b.mode == "balance-alb"; });
}

}  // namespace

ResultStream::ResultStream(std::string path, bool keep_connections) : path_(std::move(path)), keep_(keep_connections) {}

ResultStream::~ResultStream() {
  if (out_ && out_ != stdout) std::fclose(out_);
  if (spool_) std::fclose(spool_);
}

void ResultStream::fail(int err) noexcept {
  if (err_ == 0) err_ = err != 0 ? err : EIO;
}

void ResultStream::write(std::FILE* f, const std::string& text) noexcept {
  if (!f || err_ != 0) return;
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) fail(errno);
}

void ResultStream::started(const RunRecord& header) noexcept {
  started_ = true;
  try {
    builder_.emplace(header);
    if (path_.empty()) return;
    out_ = path_ == "-" ? stdout : std::fopen(path_.c_str(), "w");
    if (!out_) {
      fail(errno);
      return;
    }
    spool_ = open_spool(path_);
    if (!spool_)
      spdlog::warn("results: no temporary file for the connections ({}): they are kept in memory", errno_text(errno));
    const json head = result_header_json(builder_->header());
    std::string text = "{\n";
    for (const char* k :
         {"schema", "schema_version", "fabperf_version", "test_id", "started_at", "settings", "clients", "servers"}) {
      text += member(k, head.at(k)) + ",\n";
    }
    text += "  \"nodes\": [";
    write(out_, text);
    if (std::fflush(out_) != 0) fail(errno);
  } catch (const std::exception& e) {
    spdlog::error("results: {}", e.what());
    fail(EINVAL);
  }
}

void ResultStream::node(const NodeRecord& n) noexcept {
  try {
    if (!builder_) return;
    std::vector<ConnReport> conns;
    const NodeReport& nr = builder_->add(n, n.index, conns);
    if (needs_peer_results(nr)) {
      deferred_.push_back(n.index);  // its section is written by finish(), with the peers' notes
    } else if (out_ && err_ == 0) {
      write_node(nr);
    }
    if (out_ && err_ == 0 && spool_) {
      for (const auto& c : conns) write(spool_, element(first_conn_, connection_json(c)));
    }
    if (keep_ || (out_ && !spool_))
      conns_.insert(conns_.end(), std::make_move_iterator(conns.begin()), std::make_move_iterator(conns.end()));
  } catch (const std::exception& e) {
    spdlog::error("results of {}: {}", n.name, e.what());
    fail(EINVAL);
  }
}

void ResultStream::write_node(const NodeReport& nr) noexcept {
  write(out_, element(first_node_, node_json(nr)));
  // Into the kernel now: a coordinator killed later leaves this node on disk.
  if (std::fflush(out_) != 0) fail(errno);
}

Report ResultStream::finish(const RunRecord& run) {
  if (!started_) {
    started(run);
    for (const auto& n : run.nodes) node(n);
  }
  Report r = std::move(*builder_).finish(run.interrupted);
  builder_.reset();
  if (out_ && err_ == 0) {
    for (const auto idx : deferred_) {
      for (const auto& nr : r.nodes) {
        if (nr.index == idx) write_node(nr);
      }
    }
    std::string text = "\n  ],\n  \"connections\": [";
    write(out_, text);
    if (spool_) {
      if (std::fflush(spool_) != 0 || std::fseek(spool_, 0, SEEK_SET) != 0) fail(errno);
      std::array<char, 1 << 16> buf{};
      while (err_ == 0) {
        const std::size_t k = std::fread(buf.data(), 1, buf.size(), spool_);
        if (k == 0) {
          if (std::ferror(spool_)) fail(errno);
          break;
        }
        if (std::fwrite(buf.data(), 1, k, out_) != k) fail(errno);
      }
      std::fclose(spool_);
      spool_ = nullptr;
    } else {
      for (const auto& c : conns_) write(out_, element(first_conn_, connection_json(c)));
    }
    text = "\n  ],\n  \"pairs\": [";
    bool first = true;
    for (const auto& p : r.pairs) text += element(first, doc_json(p));
    text += "\n  ],\n";
    json tail = result_summary_json(r);
    const json summary = tail.at("summary");
    tail.erase("summary");  // last, without the comma
    for (const auto& [k, v] : tail.items()) text += member(k, v) + ",\n";
    text += member("summary", summary) + "\n}\n";
    write(out_, text);
    if (std::fflush(out_) != 0) fail(errno);
  }
  if (out_ && out_ != stdout) {
    if (std::fclose(out_) != 0) fail(errno);
  }
  out_ = nullptr;
  if (keep_) r.connections = std::move(conns_);
  conns_.clear();
  return r;
}

}  // namespace fabperf
