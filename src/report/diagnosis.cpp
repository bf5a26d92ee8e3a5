// Counter report and dip diagnosis (diagnosis.hpp): pure arithmetic over one agent's samples.
#include <fabperf/report/diagnosis.hpp>

#include <fabperf/core/stats.hpp>
#include <fabperf/report/report.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <functional>
#include <map>

namespace fabperf {
namespace {

// One source's samples as (t_ns, values) pairs, whatever struct they came in.
struct Source {
  using Sample = std::pair<std::int64_t, const CounterValues*>;
  std::string name;
  std::vector<Sample> samples;
};

// Increase of every counter between two samples (counters that went backwards were reset: 0).
std::vector<std::pair<std::string, std::uint64_t>> increases(const CounterValues& a, const CounterValues& b) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  each_counter_pair(a, b, [&](const std::string& k, std::uint64_t x, std::uint64_t y) {
    if (y > x) out.emplace_back(k, y - x);
  });
  return out;
}

// The interface's own error and drop counters, in the named form the dictionary knows.
CounterValues link_counter_values(const LinkCounters& c) {
  return {{"if.tx_errors", c.tx_errors},
          {"if.rx_errors", c.rx_errors},
          {"if.tx_dropped", c.tx_dropped},
          {"if.rx_dropped", c.rx_dropped}};
}

CounterMove make_move(const std::string& source, const std::string& name, std::uint64_t delta) {
  const CounterClass c = classify_counter(name);
  return {source, name, delta, c.category, counter_label(name)};
}

int symptom_rank(CounterCategory c) {
  const auto& order = symptom_categories();
  return static_cast<int>(std::ranges::find(order, c) - order.begin());  // order.size() when not a symptom
}

bool is_symptom(CounterCategory c) {
  return c != CounterCategory::traffic && c != CounterCategory::other;
}

// The sample of `s` nearest to t_ns (samples are in time order); -1 when it has none. A binary
// search: every dip asks, and a long run has many samples and may have many dips.
int nearest(const Source& s, std::int64_t t_ns) {
  const auto& v = s.samples;
  if (v.empty()) return -1;
  const auto i = static_cast<std::size_t>(std::ranges::lower_bound(v, t_ns, {}, &Source::Sample::first) - v.begin());
  return static_cast<int>(i == v.size() || (i > 0 && t_ns - v[i - 1].first <= v[i].first - t_ns) ? i - 1 : i);
}

// What rose in the interval (t0, t1] across the given sources: counters between the samples
// nearest to t0 and t1.
std::vector<CounterMove> rose_between(const std::vector<const Source*>& sources, std::int64_t t0, std::int64_t t1) {
  std::vector<CounterMove> out;
  for (const Source* s : sources) {
    const int i0 = nearest(*s, t0), i1 = nearest(*s, t1);
    if (i0 < 0 || i1 <= i0) continue;
    for (const auto& [k, d] : increases(*s->samples[static_cast<std::size_t>(i0)].second,
                                        *s->samples[static_cast<std::size_t>(i1)].second)) {
      CounterMove m = make_move(s->name, k, d);
      if (m.category != CounterCategory::traffic) out.push_back(std::move(m));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const CounterMove& a, const CounterMove& b) {
    const int ra = symptom_rank(a.category), rb = symptom_rank(b.category);
    return ra != rb ? ra < rb : a.delta > b.delta;
  });
  return out;
}

Dip make_dip(std::string subject, std::int64_t t0, std::int64_t t1, double rate, double med,
             const std::vector<const Source*>& sources) {
  Dip d;
  d.subject = std::move(subject);
  d.t0_s = static_cast<double>(t0) / 1e9;
  d.t1_s = static_cast<double>(t1) / 1e9;
  d.mb_per_s = rate;
  d.median_mb_per_s = med;
  d.change_pct = med > 0 ? (rate - med) / med * 100.0 : 0.0;
  auto all = rose_between(sources, t0, t1);
  // Unclassified counters are listed after the symptoms, and only a few of them.
  std::size_t others = 0;
  for (auto& m : all) {
    const bool symptom = is_symptom(m.category);
    if (d.rose.size() < kDipMaxCounters && (symptom || others < 2)) {
      if (!symptom) ++others;
      d.rose.push_back(std::move(m));
    } else {
      ++d.rose_unlisted;
    }
  }
  d.text = fmt::format("{} {:.1f}-{:.1f} s: {:.0f}%", d.subject, d.t0_s, d.t1_s, d.change_pct);
  if (d.rose.empty()) {
    d.text += "; no counter on this node rose (look at the peer and the switch)";
  }
  for (const auto& m : d.rose) {
    const bool show_source = m.source != "host" && m.source != d.subject;
    d.text += fmt::format("; {}{} +{}", show_source ? m.source + " " : "", m.name, format_count(m.delta));
    if (!m.label.empty()) d.text += " (" + m.label + ")";
  }
  if (d.rose_unlisted) d.text += fmt::format("; {} more counters rose", d.rose_unlisted);
  return d;
}

// The symptom categories that moved, in symptom order, each with its movers largest first, at most `keep`.
std::vector<CategoryMovers> rank_movers(std::map<CounterCategory, CategoryMovers> cats, std::size_t keep) {
  std::vector<CategoryMovers> out;
  for (const auto c : symptom_categories()) {
    const auto it = cats.find(c);
    if (it == cats.end() || it->second.total == 0) continue;
    std::ranges::stable_sort(it->second.top, std::greater{}, &CounterMove::delta);
    if (it->second.top.size() > keep) it->second.top.resize(keep);
    out.push_back(std::move(it->second));
  }
  return out;
}

CounterSeries make_series(const Source& s) {
  CounterSeries out;
  out.source = s.name;
  if (s.samples.empty()) return out;
  for (const auto& [t, v] : s.samples) out.t_s.push_back(static_cast<double>(t) / 1e9);
  out.first = *s.samples.front().second;
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 1; i < s.samples.size(); ++i) {
    each_counter_pair(
        *s.samples[i - 1].second, *s.samples[i].second, [&](const std::string& k, std::uint64_t x, std::uint64_t v) {
          if (x == v) return;
          auto slot = at.find(k);
          if (slot == at.end()) {
            slot = at.emplace(k, out.moved.size()).first;
            out.moved.emplace_back(k, std::vector<std::int64_t>(s.samples.size() - 1, 0));
          }
          out.moved[slot->second].second[i - 1] = static_cast<std::int64_t>(v) - static_cast<std::int64_t>(x);
        });
  }
  return out;
}

}  // namespace

std::uint64_t CounterReport::total(CounterCategory c) const {
  const auto it = std::ranges::find(categories, c, &CategoryMovers::category);
  return it == categories.end() ? 0 : it->total;
}

std::string format_count(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

CounterReport counter_report(const AgentResult& r, double dip_pct) {
  CounterReport rep;
  // Sources: per link its named statistics and its interface counters (the same instants as
  // the throughput samples), the host's MIB, each RDMA port.
  std::vector<Source> link_stats(r.links.size()), link_if(r.links.size());
  std::vector<std::vector<CounterValues>> if_values(r.links.size());
  for (std::size_t i = 0; i < r.links.size(); ++i) {
    const auto& l = r.links[i];
    link_stats[i].name = link_if[i].name = l.info.name;
    for (const auto& s : l.stats) link_stats[i].samples.emplace_back(s.t_ns, &s.values);
    if_values[i].reserve(l.samples.size());  // the sources point into it
    for (const auto& s : l.samples) {
      if (s.counters.present)
        link_if[i].samples.emplace_back(s.t_ns, &if_values[i].emplace_back(link_counter_values(s.counters)));
    }
  }
  Source host{"host", {}};
  for (const auto& s : r.host_counters) host.samples.emplace_back(s.t_ns, &s.values);
  std::vector<Source> rdma;
  for (const auto& p : r.rdma_ports) {
    auto& s = rdma.emplace_back(Source{fmt::format("{}:{}", p.device, p.info.port), {}});
    for (const auto& x : p.samples) {
      if (x.counters.present) s.samples.emplace_back(x.t_ns, &x.counters.values);
    }
  }

  std::vector<const Source*> named, rdma_sources;  // named: every source but the interface counters
  for (const auto& s : link_stats) named.push_back(&s);
  named.push_back(&host);
  for (const auto& s : rdma) named.push_back(rdma_sources.emplace_back(&s));
  for (const Source* s : named) {
    if (!s->samples.empty()) rep.series.push_back(make_series(*s));
  }

  // Dips per link, from its own interface counters; the counters that may explain one are the
  // link's, the host's and the RDMA ports' (a RoCE port sits on some link).
  const double keep = 1.0 - dip_pct / 100.0;
  const auto add_dips = [&](const std::string& subject, const std::vector<std::int64_t>& t,
                            const std::vector<double>& rates, std::vector<const Source*> sources) {
    sources.insert(sources.end(), rdma_sources.begin(), rdma_sources.end());
    const double med = stats::median(rates);
    for (std::size_t k = 0; k < rates.size() && med >= kDipMinMedianMbPerS; ++k) {
      if (rates[k] < keep * med) rep.dips.push_back(make_dip(subject, t[k], t[k + 1], rates[k], med, sources));
    }
  };
  for (std::size_t i = 0; i < r.links.size(); ++i) {
    const CounterWindow cw = counter_window(r.links[i]);
    if (cw.ok.size() < 3) continue;  // one interval has no median to fall below
    std::vector<std::int64_t> t;
    for (const auto* s : cw.ok) t.push_back(s->t_ns);
    std::vector<double> rates;
    for (const auto& iv : cw.intervals) rates.push_back(std::max(iv.tx_mb_per_s, iv.rx_mb_per_s));
    add_dips(r.links[i].info.name, t, rates, {&link_stats[i], &link_if[i], &host});
  }
  // A node without sampled links: its own interval totals.
  if (r.links.empty() && r.intervals.size() >= 2) {
    std::vector<std::int64_t> t{0};
    std::vector<double> rates;
    for (const auto& iv : r.intervals) {
      const double dt = static_cast<double>(iv.t_ns - t.back()) / 1e9;
      rates.push_back(dt > 0 ? static_cast<double>(iv.tx_bytes + iv.rx_bytes) / dt / 1e6 : 0.0);
      t.push_back(iv.t_ns);
    }
    add_dips("node", t, rates, {&host});
  }

  // Category totals over the window: every source, first sample to last.
  std::map<CounterCategory, CategoryMovers> cats;
  auto add_window = [&](const Source& s) {
    if (s.samples.size() < 2) return;
    for (const auto& [k, d] : increases(*s.samples.front().second, *s.samples.back().second)) {
      CounterMove m = make_move(s.name, k, d);
      if (!is_symptom(m.category)) continue;
      auto& c = cats.try_emplace(m.category, CategoryMovers{m.category, 0, {}}).first->second;
      c.total += d;
      c.top.push_back(std::move(m));
    }
  };
  for (const auto& s : link_stats) add_window(s);
  for (const auto& s : link_if) add_window(s);
  add_window(host);
  for (const Source* s : rdma_sources) add_window(*s);
  rep.categories = rank_movers(std::move(cats), 5);
  return rep;
}

std::vector<CategoryMovers> top_movers(const std::vector<std::pair<std::string, const CounterReport*>>& nodes,
                                       std::size_t per_category) {
  std::map<CounterCategory, CategoryMovers> cats;
  for (const auto& [name, rep] : nodes) {
    for (const auto& cat : rep->categories) {
      auto& m = cats.try_emplace(cat.category, CategoryMovers{cat.category, 0, {}}).first->second;
      m.total += cat.total;
      for (auto mv : cat.top) {
        mv.source = name + "/" + mv.source;
        m.top.push_back(std::move(mv));
      }
    }
  }
  return rank_movers(std::move(cats), per_category);
}

}  // namespace fabperf
