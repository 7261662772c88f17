#include "knobs.h"

#include <arpa/inet.h>

#include <charconv>
#include <sstream>

#include "control.h"

namespace mrc::nccl {
namespace {

Result<uint64_t, std::string> number(const char* name, const std::string& v, uint64_t lo,
                                     uint64_t hi) {
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    return Err(std::string(name) + ": must be an integer in " + std::to_string(lo) + ".." +
               std::to_string(hi) + ", got \"" + v + "\"");
  return x;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

Result<Knobs, std::string> read_knobs(const io::Getenv& env) {
  Knobs k;
  std::string error;
  auto num = [&](const char* name, auto& field, uint64_t lo, uint64_t hi) {
    if (!error.empty()) return;
    if (auto v = env(name)) {
      auto r = number(name, *v, lo, hi);
      if (!r.ok())
        error = r.error();
      else
        field = static_cast<std::remove_reference_t<decltype(field)>>(*r);
    }
  };
  num("NCCL_MRC_TIMEOUT", k.timeout, 1, 24);
  num("NCCL_MRC_RETRY_CNT_LINEAR", k.retry_cnt_linear, 0, 7);
  num("NCCL_MRC_RETRY_CNT_EXP", k.retry_cnt_exp, 0, 25);
  uint64_t hint = 1;
  num("NCCL_MRC_QP_HINT_ENABLE", hint, 0, 1);
  k.qp_hint = hint != 0;
  num("NCCL_MRC_CC_INIT_RATE", k.cc_init_mbps, 0, 100'000'000);
  num("NCCL_MRC_CC_MIN_RATE", k.cc_min_mbps, 0, 100'000'000);
  num("NCCL_MRC_CC_MAX_RATE", k.cc_max_mbps, 0, 100'000'000);
  num("NCCL_MRC_MAX_PSN_RANGE", k.max_psn_range, 1, 1u << 20);
  num("NCCL_MRC_QPS_PER_CONN", k.qps_per_conn, 1, kMaxQps);
  num("NCCL_MRC_EAGER", k.eager_bytes, 0, kMaxEagerSlotBytes - 4);
  if (!error.empty()) return Err(error);
  if (k.cc_max_mbps && k.cc_min_mbps > k.cc_max_mbps)
    return Err("NCCL_MRC_CC_MIN_RATE: " + std::to_string(k.cc_min_mbps) +
               " Mbit/s is above NCCL_MRC_CC_MAX_RATE " + std::to_string(k.cc_max_mbps));
  if (auto v = env("NCCL_MRC_CONFIG")) k.config_files = split(*v);
  if (auto v = env("NCCL_MRC_DEVICES")) {
    for (const std::string& d : split(*v)) {
      auto r = number("NCCL_MRC_DEVICES", d, 0, 63);
      if (!r.ok()) return Err(r.error() + " (a comma-separated list of device indexes)");
      k.devices.push_back(static_cast<uint32_t>(*r));
    }
  }
  if (auto v = env("NCCL_MRC_CTRL_ADDR")) {
    in6_addr a;
    in_addr a4;
    if (inet_pton(AF_INET, v->c_str(), &a4) == 1) {
      k.ctrl_addr = "::ffff:" + *v;  // IPv4, as the dual-stack sockets take it
    } else if (inet_pton(AF_INET6, v->c_str(), &a) == 1) {
      k.ctrl_addr = *v;
    } else {
      return Err("NCCL_MRC_CTRL_ADDR: not an IPv6 or IPv4 address: \"" + *v + "\"");
    }
  }
  return k;
}

}  // namespace mrc::nccl
