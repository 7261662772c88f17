#include "mrc/testing/goodput.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace mrc::sim {

namespace {

double seconds(Duration d) { return static_cast<double>(d.count()) * 1e-9; }

}  // namespace

// ---- GoodputMeter ----------------------------------------------------------------------

struct GoodputMeter::State {
  SimNet& net;
  std::function<uint64_t()> counter;
  Duration interval;
  std::vector<Interval> intervals;
  uint64_t last = 0;
  bool stopped = false;
  bool started = false;

  State(SimNet& n, std::function<uint64_t()> c, Duration i)
      : net(n), counter(std::move(c)), interval(i) {}

  static void sample(const std::shared_ptr<State>& s, Time t) {
    if (s->stopped) return;
    const uint64_t v = s->counter();
    s->intervals.push_back(Interval{t, v - s->last});
    s->last = v;
    schedule(s, t + s->interval);
  }
  static void schedule(const std::shared_ptr<State>& s, Time t) {
    s->net.at(t, [s, t] { sample(s, t); });
  }

  // Indices [first, last) of the intervals wholly in [from, to].
  std::pair<size_t, size_t> range(Time from, Time to) const {
    size_t first = 0;
    while (first < intervals.size() && intervals[first].end - interval < from) ++first;
    size_t last = first;
    while (last < intervals.size() && intervals[last].end <= to) ++last;
    return {first, last};
  }
  double rate(uint64_t bytes, size_t n) const {
    return n == 0 ? 0.0 : static_cast<double>(bytes) * 8 / (seconds(interval) * n);
  }
};

GoodputMeter::GoodputMeter(SimNet& net, std::function<uint64_t()> counter, Duration interval)
    : s_(std::make_shared<State>(net, std::move(counter), interval)) {
  if (interval.count() <= 0) throw std::invalid_argument("GoodputMeter: interval must be > 0");
}

GoodputMeter::~GoodputMeter() { s_->stopped = true; }

void GoodputMeter::start(Time at) {
  if (s_->started) throw std::invalid_argument("GoodputMeter: started twice");
  s_->started = true;
  const Time t = std::max(at, s_->net.now());
  std::shared_ptr<State> s = s_;
  s_->net.at(t, [s, t] {
    if (s->stopped) return;
    s->last = s->counter();
    State::schedule(s, t + s->interval);
  });
}

void GoodputMeter::stop() { s_->stopped = true; }

Duration GoodputMeter::interval() const { return s_->interval; }
std::span<const GoodputMeter::Interval> GoodputMeter::intervals() const { return s_->intervals; }

double GoodputMeter::rate_bps(Time from, Time to) const {
  const auto [a, b] = s_->range(from, to);
  uint64_t sum = 0;
  for (size_t i = a; i < b; ++i) sum += s_->intervals[i].bytes;
  return s_->rate(sum, b - a);
}

double GoodputMeter::min_rate_bps(Time from, Time to, Duration window) const {
  const auto [a, b] = s_->range(from, to);
  if (a == b) return 0;
  const size_t w = std::min(b - a, std::max<size_t>(1, static_cast<size_t>(window / s_->interval)));
  uint64_t sum = 0;
  for (size_t i = a; i < a + w; ++i) sum += s_->intervals[i].bytes;
  uint64_t best = sum;
  for (size_t i = a + w; i < b; ++i) {
    sum += s_->intervals[i].bytes;
    sum -= s_->intervals[i - w].bytes;
    best = std::min(best, sum);
  }
  return s_->rate(best, w);
}

Duration GoodputMeter::longest_stall(Time from, Time to) const {
  const auto [a, b] = s_->range(from, to);
  size_t run = 0, best = 0;
  for (size_t i = a; i < b; ++i) {
    run = s_->intervals[i].bytes == 0 ? run + 1 : 0;
    best = std::max(best, run);
  }
  return s_->interval * static_cast<int64_t>(best);
}

std::string GoodputMeter::csv() const {
  std::string out = "time_s,gbps\n";
  char b[64];
  for (const Interval& i : s_->intervals) {
    std::snprintf(b, sizeof b, "%.6f,%.3f\n", seconds(i.end), s_->rate(i.bytes, 1) * 1e-9);
    out += b;
  }
  return out;
}

double jain_fairness(std::span<const double> x) {
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  if (x.empty() || sq == 0) return 1.0;
  return sum * sum / (static_cast<double>(x.size()) * sq);
}

}  // namespace mrc::sim
