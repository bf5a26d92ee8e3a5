// The text renderers' one table: columns sized to their content, the first column and every
// column holding text left-aligned, columns of numbers (or "-") right-aligned. Formatting only.
#pragma once

#include <fabperf/core/units.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace fabperf::text {

// A header cell: a column's (units.hpp) header, or a text.
struct Head {
  Head(const Column& c) : text(c.header) {}
  Head(std::string t) : text(std::move(t)) {}
  Head(const char* t) : text(t) {}
  std::string text;
};

class Table {
 public:
  // numeric_ is sized here, not on the first add(): a table with no rows (every agent lost, no
  // pair reported) is still printed, and str() reads it for every column.
  explicit Table(const std::vector<Head>& headers) : rows_(1), numeric_(headers.size(), true) {
    for (const auto& c : headers) rows_[0].push_back(c.text);
  }
  void add(std::vector<std::string> row) {
    for (std::size_t i = 0; i < row.size() && i < numeric_.size(); ++i) {
      const auto& v = row[i];
      const bool num = v == "-" || (!v.empty() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-') &&
                                    v.find_first_not_of("0123456789.-") == std::string::npos);
      numeric_[i] = numeric_[i] && num;
    }
    rows_.push_back(std::move(row));
  }
  [[nodiscard]] bool empty() const { return rows_.size() <= 1; }
  [[nodiscard]] std::string str(const std::string& indent = "  ") const {
    std::vector<std::size_t> w(rows_[0].size(), 0);
    for (const auto& r : rows_) {
      for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      out += indent;
      for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) {
        const bool left = i == 0 || !numeric_[i];
        if (i > 0) out += "  ";
        out += left ? fmt::format("{:<{}}", r[i], w[i]) : fmt::format("{:>{}}", r[i], w[i]);
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += '\n';
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> numeric_;
};

inline std::string f1(double v) {
  return fmt::format("{:.1f}", v);
}
inline std::string f0(double v) {
  return fmt::format("{:.0f}", v);
}
// Negative is the sources' "not measured": shown as "-", never as a number.
inline std::string count_or_dash(std::int64_t v) {
  return v >= 0 ? std::to_string(v) : std::string("-");
}
// 0 or less is "unknown" (a speed, an MTU, an RTT): "-".
inline std::string positive_or_dash(std::int64_t v) {
  return v > 0 ? std::to_string(v) : std::string("-");
}
// An empty text is "unknown": `dash` ("-", or "?" where a word is missing).
inline std::string or_dash(const std::string& v, const char* dash = "-") {
  return v.empty() ? std::string(dash) : v;
}
inline std::string f1_or_dash(double v) {
  return v >= 0 ? f1(v) : std::string("-");
}
// Microseconds: more decimals the smaller the figure, so a 3 us loopback and a 250 us WAN hop both
// show their significant digits.
inline std::string us(double v) {
  if (v >= 100) return f0(v);
  if (v >= 10) return f1(v);
  return fmt::format("{:.2f}", v);
}

}  // namespace fabperf::text
