#include "pattern.h"

#include <algorithm>
#include <numeric>

namespace mrc::msim {
namespace {

uint64_t mix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void add_flow(Workload& w, uint32_t src, uint32_t dst, uint64_t bytes, uint64_t msg) {
  const auto f = static_cast<uint32_t>(w.flows.size());
  w.flows.push_back(Flow{src, dst, bytes});
  for (uint64_t done = 0; done < bytes; done += msg)
    w.messages.push_back(Message{f, std::min(msg, bytes - done), -1});
}

}  // namespace

std::optional<Pattern> parse_pattern(std::string_view name) {
  for (size_t i = 0; i < std::size(kPatternNames); ++i)
    if (name == kPatternNames[i]) return static_cast<Pattern>(i);
  return std::nullopt;
}

const char* to_string(Pattern p) { return kPatternNames[static_cast<size_t>(p)]; }

uint64_t Workload::total_bytes() const {
  uint64_t n = 0;
  for (const Flow& f : flows) n += f.bytes;
  return n;
}

std::vector<uint32_t> derangement(uint32_t n, uint64_t seed) {
  // Sattolo's shuffle: a uniformly random single n-cycle, so no fixed point.
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  uint64_t x = seed ^ 0xD1B54A32D192ED03ull;
  for (uint32_t i = n - 1; i > 0; --i) std::swap(p[i], p[mix(x) % i]);
  return p;
}

Result<Workload, std::string> make_workload(const WorkloadSpec& s) {
  using E = Err<std::string>;
  if (s.hosts < 2) return E{"a pattern needs at least 2 hosts"};
  if (s.bytes == 0) return E{"--bytes must be > 0"};
  if (s.msg_bytes == 0) return E{"--msg-bytes must be > 0"};
  Workload w;
  w.spec = s;
  switch (s.pattern) {
    case Pattern::kPermutation: {
      const auto p = derangement(s.hosts, s.seed);
      for (uint32_t h = 0; h < s.hosts; ++h) add_flow(w, h, p[h], s.bytes, s.msg_bytes);
      break;
    }
    case Pattern::kAlltoall:
      // Peers in NCCL's p2p order: a sends to a+1, a+2, ... (each host's k-th flow goes to
      // a different receiver, so a window of W flows per host loads every receiver alike).
      for (uint32_t a = 0; a < s.hosts; ++a)
        for (uint32_t k = 1; k < s.hosts; ++k)
          add_flow(w, a, (a + k) % s.hosts, s.bytes, s.msg_bytes);
      break;
    case Pattern::kRingAllreduce: {
      const uint64_t n = s.hosts;
      if (s.slices == 0) return E{"--slices must be > 0"};
      if (s.bytes < n * s.slices)
        return E{"ring-allreduce: --bytes must be at least hosts x slices (" +
                 std::to_string(n * s.slices) + ")"};
      const uint64_t chunk = s.bytes / n;
      const uint64_t steps = 2 * (n - 1);
      for (uint32_t r = 0; r < n; ++r)
        w.flows.push_back(Flow{r, static_cast<uint32_t>((r + 1) % n), steps * chunk});
      // Message (r, k, j) is index (r * steps + k) * slices + j.
      w.messages.resize(n * steps * s.slices);
      for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t k = 0; k < steps; ++k) {
          for (uint64_t j = 0; j < s.slices; ++j) {
            Message& m = w.messages[(r * steps + k) * s.slices + j];
            m.flow = static_cast<uint32_t>(r);
            const uint64_t base = chunk / s.slices;
            m.bytes = j + 1 < s.slices ? base : chunk - base * (s.slices - 1);
            if (k > 0) {
              const uint64_t prev = (r + n - 1) % n;
              m.after = static_cast<int64_t>((prev * steps + k - 1) * s.slices + j);
            }
          }
        }
      }
      break;
    }
    case Pattern::kIncast: {
      if (s.incast_dst >= s.hosts) return E{"incast: the receiver is not one of the hosts"};
      if (s.incast_senders == 0 || s.incast_senders >= s.hosts)
        return E{"incast: --incast-senders must be 1.." + std::to_string(s.hosts - 1)};
      std::vector<uint32_t> others;
      for (uint32_t h = 0; h < s.hosts; ++h)
        if (h != s.incast_dst) others.push_back(h);
      uint64_t x = s.seed ^ 0x1ca57ull;
      for (size_t i = others.size() - 1; i > 0; --i) std::swap(others[i], others[mix(x) % (i + 1)]);
      others.resize(s.incast_senders);
      std::sort(others.begin(), others.end());
      for (uint32_t h : others) add_flow(w, h, s.incast_dst, s.bytes, s.msg_bytes);
      break;
    }
  }
  return w;
}

double ideal_seconds(const Workload& w, const Capacity& c) {
  const uint32_t H = w.spec.hosts;
  const uint32_t t0s = (H + c.hosts_per_t0 - 1) / c.hosts_per_t0;
  std::vector<double> sent(H), recv(H), t0_out(t0s), t0_in(t0s);
  for (const Flow& f : w.flows) {
    const auto b = static_cast<double>(f.bytes);
    sent[f.src] += b;
    recv[f.dst] += b;
    const uint32_t ta = f.src / c.hosts_per_t0, tb = f.dst / c.hosts_per_t0;
    if (ta != tb) t0_out[ta] += b, t0_in[tb] += b;
  }
  const double port = 8.0 / (static_cast<double>(c.planes) * static_cast<double>(c.host_port_bps));
  const double up =
      8.0 / (static_cast<double>(c.planes) * c.spines * static_cast<double>(c.uplink_bps));
  double t = 0;
  for (uint32_t h = 0; h < H; ++h) t = std::max({t, sent[h] * port, recv[h] * port});
  for (uint32_t i = 0; i < t0s; ++i) t = std::max({t, t0_out[i] * up, t0_in[i] * up});
  return t;
}

}  // namespace mrc::msim
