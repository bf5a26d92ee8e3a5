// Reading a results file back (--resume): the last record of a step id wins.
#include <fabperf/error.hpp>
#include <fabperf/plan.hpp>

#include <fmt/format.h>
#include <fstream>

namespace fabperf::plan {

ResumeState read_results(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--resume {}: cannot be read ({})", path, errno_text(errno)));
  ResumeState st;
  std::string line;
  std::size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      // A crash can leave a torn last line: everything before it still counts.
      if (in.peek() == std::char_traits<char>::eof()) break;
      throw UsageError(fmt::format("{}:{}: not a JSON line", path, no));
    }
    const std::string type = j.is_object() ? j.value("type", "") : "";
    if (no == 1 || st.plan_record.is_null()) {
      if (type != "plan" || j.value("schema", "") != kResultsSchema) {
        throw UsageError(fmt::format("{}:{}: not a fabperf plan results file (no plan record)", path, no));
      }
      if (j.value("version", 0) != kResultsVersion) {
        throw UsageError(fmt::format("{}:{}: results format version {} (this fabperf reads {})", path, no,
                                     j.value("version", 0), kResultsVersion));
      }
      st.plan_record = j;
      continue;
    }
    try {
      if (type == "step") {
        st.steps[j.at("id").get<std::string>()] = j;
      } else if (type == "kpi") {
        st.kpis.push_back(kpi_check_from_json(j));
      } else if (type != "plan" && type != "end" && type != "hook" && type != "isolate" && type != "isolation") {
        // hook, isolate and isolation records (A/B hooks, isolation rounds) are history: a
        // resumed run does not need them.
        throw UsageError("unknown record type");
      }
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("{}:{}: malformed {} record ({})", path, no, type, e.what()));
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}:{}: {} '{}'", path, no, e.what(), type));
    }
  }
  if (st.plan_record.is_null()) throw UsageError(fmt::format("--resume {}: empty results file", path));
  return st;
}

}  // namespace fabperf::plan
