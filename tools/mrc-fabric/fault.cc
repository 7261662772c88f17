// The fault language: words to Fault and back (see fault.h).
#include "fault.h"

#include <cstdio>
#include <map>

#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

namespace mrc::nsfabric {
namespace {

const char kActions[] =
    "down, up, blackhole, unblackhole, loss, flap, unflap, degrade, delay, corrupt, reorder, trim "
    "or untrim";

std::string got(const std::optional<std::string>& w) { return w ? "'" + *w + "'" : "end of input"; }

class Words {
 public:
  explicit Words(std::string_view text) {
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
      const size_t start = i;
      while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') ++i;
      if (i > start) w_.emplace_back(text.substr(start, i - start));
    }
  }
  std::optional<std::string> next() {
    if (i_ == w_.size()) return std::nullopt;
    return w_[i_++];
  }
  bool empty() const { return w_.empty(); }

 private:
  std::vector<std::string> w_;
  size_t i_ = 0;
};

std::optional<uint32_t> number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  uint32_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Reads "<letter><N>"; `after` is what came before, for the error.
Result<uint32_t, std::string> expect(Words& w, char letter, const std::string& after) {
  const auto word = w.next();
  if (word && word->size() > 1 && (*word)[0] == letter) {
    if (auto n = number(std::string_view(*word).substr(1))) return *n;
  }
  return Err("expected " + std::string(1, letter) + "<N> after " + after + ", got " + got(word));
}

Result<Target, std::string> parse_target(Words& w, const std::string& action) {
  const auto kind = w.next();
  Target t;
  if (kind && *kind == "t1") {
    auto p = expect(w, 'p', "t1");
    if (!p) return Err(p.error());
    auto s = expect(w, 's', "t1 p" + std::to_string(*p));
    if (!s) return Err(s.error());
    t.kind = Target::Kind::kT1;
    t.plane = *p;
    t.spine = *s;
    return t;
  }
  if (!kind || (*kind != "t0" && *kind != "link")) {
    return Err("expected t0, t1 or link after " + action + ", got " + got(kind));
  }
  // t0 / link, then p<P> ... or h<H> p<P>.
  const auto a = w.next();
  const char lead = a && a->size() > 1 ? (*a)[0] : 0;
  const auto n =
      (lead == 'p' || lead == 'h') ? number(std::string_view(*a).substr(1)) : std::nullopt;
  if (!n) return Err("expected p<N> or h<N> after " + *kind + ", got " + got(a));
  const std::string so_far = *kind + " " + *a;
  if (lead == 'h') {
    auto p = expect(w, 'p', so_far);
    if (!p) return Err(p.error());
    t.kind = *kind == "t0" ? Target::Kind::kT0OfHost : Target::Kind::kHostLink;
    t.host = *n;
    t.plane = *p;
    return t;
  }
  t.plane = *n;
  auto t0 = expect(w, 't', so_far);
  if (!t0) return Err(t0.error());
  t.t0 = *t0;
  if (*kind == "t0") {
    t.kind = Target::Kind::kT0;
    return t;
  }
  auto s = expect(w, 's', so_far + " t" + std::to_string(*t0));
  if (!s) return Err(s.error());
  t.kind = Target::Kind::kUplink;
  t.spine = *s;
  return t;
}

std::string pct_string(double pct) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", pct);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

const char* action_word(Action a) {
  switch (a) {
    case Action::kDown:
      return "down";
    case Action::kUp:
      return "up";
    case Action::kBlackhole:
      return "blackhole";
    case Action::kUnblackhole:
      return "unblackhole";
    case Action::kLoss:
      return "loss";
    case Action::kFlap:
      return "flap";
    case Action::kUnflap:
      return "unflap";
    case Action::kDegrade:
      return "degrade";
    case Action::kDelay:
      return "delay";
    case Action::kCorrupt:
      return "corrupt";
    case Action::kReorder:
      return "reorder";
  }
  return "?";
}

const char* direction_word(Direction d) {
  return d == Direction::kUp ? "up" : d == Direction::kDown ? "down" : "";
}

// A percentage 0..100 ("%" allowed), rounded to 0.01; nullopt if the word is not one.
std::optional<double> percent(const std::optional<std::string>& word) {
  std::string_view s = word ? std::string_view(*word) : std::string_view();
  if (!s.empty() && s.back() == '%') s.remove_suffix(1);
  double pct = -1;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), pct);
  if (!word || r.ec != std::errc() || r.ptr != s.data() + s.size() || !(pct >= 0 && pct <= 100)) {
    return std::nullopt;
  }
  return std::round(pct * 100) / 100;
}

Result<Fault, std::string> parse_trim(Words& w, const std::string& first) {
  TrimFault f;
  f.on = first == "trim";
  auto t = parse_target(w, first);
  if (!t) return Err(t.error());
  f.target = *t;
  if (f.target.is_switch()) {
    return Err(first + " needs a link (link p<P> t<T> s<S> or link h<H> p<P>), got " +
               to_string(f.target));
  }
  const std::string so_far = first + " " + to_string(f.target);
  if (f.on) {
    const auto word = w.next();
    double gbps = -1;
    const auto r = word ? std::from_chars(word->data(), word->data() + word->size(), gbps)
                        : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (!word || r.ec != std::errc() || r.ptr != word->data() + word->size() || !(gbps > 0)) {
      return Err("expected the port rate in Gbit/s (> 0) after " + so_far + ", got " + got(word));
    }
    f.gbps = gbps;
    if (const auto kb = w.next()) {
      const auto v = number(*kb);
      if (!v || *v == 0) return Err("expected trim_kb (KiB > 0) after the rate, got '" + *kb + "'");
      f.trim_kb = *v;
      if (const auto ekb = w.next()) {
        const auto e = number(*ekb);
        if (!e || *e > f.trim_kb)
          return Err("expected ecn_kb (KiB <= trim_kb) after trim_kb, got '" + *ekb + "'");
        f.ecn_kb = *e;
      } else if (f.ecn_kb > f.trim_kb) {
        f.ecn_kb = f.trim_kb;
      }
    }
  }
  if (const auto extra = w.next()) {
    return Err("unexpected '" + *extra + "' after '" + to_string(Fault{f}) + "'");
  }
  return Fault{f};
}

}  // namespace

Result<Fault, std::string> parse_fault(std::string_view text) {
  Words w(text);
  const auto first = w.next();
  if (!first) return Err("empty fault (expected " + std::string(kActions) + ")");
  if (*first == "trim" || *first == "untrim") return parse_trim(w, *first);
  static constexpr Action kAll[] = {Action::kDown,        Action::kUp,      Action::kBlackhole,
                                    Action::kUnblackhole, Action::kLoss,    Action::kFlap,
                                    Action::kUnflap,      Action::kDegrade, Action::kDelay,
                                    Action::kCorrupt,     Action::kReorder};
  ElementFault f;
  bool known = false;
  for (Action a : kAll) {
    if (*first == action_word(a)) {
      f.action = a;
      known = true;
    }
  }
  if (!known) return Err("unknown fault '" + *first + "' (expected " + kActions + ")");
  auto t = parse_target(w, *first);
  if (!t) return Err(t.error());
  f.target = *t;
  const std::string so_far = *first + " " + to_string(f.target);
  const bool wants_link = f.action != Action::kDown && f.action != Action::kUp &&
                          f.action != Action::kBlackhole && f.action != Action::kUnblackhole;
  if (wants_link && f.target.is_switch()) {
    return Err(*first + " needs a link (link p<P> t<T> s<S> or link h<H> p<P>), got " +
               to_string(f.target));
  }
  // An optional direction word ("up" / "down") for one-way losses and link blackholes.
  const auto direction = [&](std::optional<std::string> word) -> Result<bool, std::string> {
    if (!word) return false;
    if (*word == "up") f.dir = Direction::kUp;
    if (*word == "down") f.dir = Direction::kDown;
    if (f.dir == Direction::kBoth) {
      return Err("expected up or down (the direction) after " + to_string(Fault{f}) + ", got '" +
                 *word + "'");
    }
    return true;
  };
  if (f.action == Action::kLoss || f.action == Action::kCorrupt || f.action == Action::kReorder) {
    const auto word = w.next();
    const auto pct = percent(word);
    if (!pct) {
      return Err("expected a" + std::string(f.action == Action::kLoss ? " loss" : "") +
                 " percentage 0..100 after " + so_far + ", got " + got(word));
    }
    f.loss_pct = *pct;
    if (f.action == Action::kLoss) {
      if (auto d = direction(w.next()); !d) return Err(d.error());
    } else if (f.action == Action::kReorder && f.loss_pct > 0) {
      f.us = kDefaultReorderUs;
      if (const auto us = w.next()) {
        const auto v = number(*us);
        if (!v || *v == 0 || *v > kMaxDelayUs) {
          return Err("expected the hold time in us (1.." + std::to_string(kMaxDelayUs) +
                     ") after " + so_far + " " + pct_string(f.loss_pct) + ", got '" + *us + "'");
        }
        f.us = *v;
      }
    }
  } else if (f.action == Action::kFlap) {
    const auto word = w.next();
    const auto ms = word ? number(*word) : std::nullopt;
    if (!ms || *ms < kMinFlapPeriodMs) {
      return Err("expected a flap period in ms (>= " + std::to_string(kMinFlapPeriodMs) +
                 ") after " + so_far + ", got " + got(word));
    }
    f.period_ms = *ms;
  } else if (f.action == Action::kDegrade) {
    const auto word = w.next();
    double gbps = -1;
    const auto r = word ? std::from_chars(word->data(), word->data() + word->size(), gbps)
                        : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (!word || r.ec != std::errc() || r.ptr != word->data() + word->size() ||
        !(gbps == 0 || (gbps >= kMinShapedGbps && gbps <= kMaxShapedGbps))) {
      char range[96];
      std::snprintf(range, sizeof range, "%g..%g", kMinShapedGbps, kMaxShapedGbps);
      return Err("expected the degraded rate in Gbit/s (" + std::string(range) +
                 ", 0 restores) after " + so_far + ", got " + got(word));
    }
    f.gbps = gbps;
  } else if (f.action == Action::kDelay) {
    const auto word = w.next();
    const auto us = word ? number(*word) : std::nullopt;
    if (!us || *us > kMaxDelayUs) {
      return Err("expected the added delay in us (0.." + std::to_string(kMaxDelayUs) +
                 ", 0 removes) after " + so_far + ", got " + got(word));
    }
    f.us = *us;
  } else if ((f.action == Action::kBlackhole || f.action == Action::kUnblackhole) &&
             !f.target.is_switch()) {
    if (auto d = direction(w.next()); !d) return Err(d.error());
  }
  if (const auto extra = w.next()) {
    return Err("unexpected '" + *extra + "' after '" + to_string(Fault{f}) + "'");
  }
  return Fault{f};
}

std::string to_string(const Target& t) {
  const std::string p = "p" + std::to_string(t.plane);
  switch (t.kind) {
    case Target::Kind::kT0:
      return "t0 " + p + " t" + std::to_string(t.t0);
    case Target::Kind::kT0OfHost:
      return "t0 h" + std::to_string(t.host) + " " + p;
    case Target::Kind::kT1:
      return "t1 " + p + " s" + std::to_string(t.spine);
    case Target::Kind::kUplink:
      return "link " + p + " t" + std::to_string(t.t0) + " s" + std::to_string(t.spine);
    case Target::Kind::kHostLink:
      return "link h" + std::to_string(t.host) + " " + p;
  }
  return "?";
}

std::string to_string(const Fault& fault) {
  if (const auto* t = std::get_if<TrimFault>(&fault)) {
    if (!t->on) return "untrim " + to_string(t->target);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", t->gbps);
    return "trim " + to_string(t->target) + " " + rate + " " + std::to_string(t->trim_kb) + " " +
           std::to_string(t->ecn_kb);
  }
  const ElementFault& f = std::get<ElementFault>(fault);
  std::string s = std::string(action_word(f.action)) + " " + to_string(f.target);
  switch (f.action) {
    case Action::kLoss:
    case Action::kCorrupt:
      s += " " + pct_string(f.loss_pct);
      break;
    case Action::kReorder:
      s += " " + pct_string(f.loss_pct);
      if (f.loss_pct > 0) s += " " + std::to_string(f.us);
      break;
    case Action::kFlap:
      s += " " + std::to_string(f.period_ms);
      break;
    case Action::kDegrade: {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", f.gbps);
      s += std::string(" ") + rate;
      break;
    }
    case Action::kDelay:
      s += " " + std::to_string(f.us);
      break;
    default:
      break;
  }
  if (f.dir != Direction::kBoth) s += std::string(" ") + direction_word(f.dir);
  return s;
}

std::vector<Fault> repairs(const std::vector<Fault>& schedule) {
  std::vector<std::string> order;  // targets, first seen first
  std::map<std::string, Fault> last;
  for (const Fault& f : schedule) {
    const Target& t = std::visit([](const auto& x) -> const Target& { return x.target; }, f);
    std::string key = to_string(t);
    // Gray faults of one link are independent of each other and of its up/down state; a
    // one-way loss or link blackhole is independent of the other direction.
    if (const auto* e = std::get_if<ElementFault>(&f)) {
      const Action a = e->action == Action::kUnblackhole ? Action::kBlackhole : e->action;
      const bool own_key = a == Action::kLoss || a == Action::kBlackhole || a == Action::kDegrade ||
                           a == Action::kDelay || a == Action::kCorrupt || a == Action::kReorder;
      if (own_key) {
        key += std::string(" ") + action_word(a) + " " + direction_word(e->dir);
      }
    }
    if (!last.count(key)) order.push_back(key);
    last.insert_or_assign(key, f);
  }
  std::vector<Fault> out;
  for (const std::string& key : order) {
    const Fault& f = last.at(key);
    if (const auto* t = std::get_if<TrimFault>(&f)) {
      if (t->on) out.push_back(TrimFault{false, t->target});
      continue;
    }
    const ElementFault& e = std::get<ElementFault>(f);
    switch (e.action) {
      case Action::kDown: out.push_back(ElementFault{Action::kUp, e.target}); break;
      case Action::kBlackhole: {
        ElementFault r{Action::kUnblackhole, e.target};
        r.dir = e.dir;
        out.push_back(r);
        break;
      }
      case Action::kLoss:
      case Action::kCorrupt:
      case Action::kReorder:
        if (e.loss_pct > 0) {
          ElementFault r{e.action, e.target, 0};
          r.dir = e.dir;
          out.push_back(r);
        }
        break;
      case Action::kDegrade:
        if (e.gbps > 0) {
          ElementFault r{e.action, e.target};
          out.push_back(r);
        }
        break;
      case Action::kDelay:
        if (e.us > 0) out.push_back(ElementFault{e.action, e.target});
        break;
      case Action::kFlap: out.push_back(ElementFault{Action::kUnflap, e.target}); break;
      default: break;  // already a repair
    }
  }
  return out;
}

}  // namespace mrc::nsfabric
