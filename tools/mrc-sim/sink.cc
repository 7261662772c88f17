#include "sink.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mrc::msim {
namespace {

thread_local VerifySink* g_active = nullptr;

// Sum of i and of i^2 over [0, n), mod 2^64.
uint64_t sum1(uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(n) * (n - (n > 0))) / 2);
}
uint64_t sum2(uint64_t n) {
  if (n == 0) return 0;
  const unsigned __int128 m = n;
  return static_cast<uint64_t>((m - 1) * m * (2 * m - 1) / 6);
}

}  // namespace

VerifySink::VerifySink(std::span<const uint8_t> source) : source_(source) {}

VerifySink::~VerifySink() {
  if (g_active == this) g_active = nullptr;
  if (base_) ::munmap(base_, reserved_);
}

void VerifySink::layout(uint32_t hosts, std::span<const uint32_t> dst,
                        std::span<const uint64_t> bytes, std::span<const uint64_t> src_offset) {
  const size_t n = dst.size();
  std::vector<uint64_t> per_host(hosts + 1, 0);
  for (size_t i = 0; i < n; ++i) per_host[dst[i] + 1] += bytes[i];
  win_start_.assign(hosts + 1, 0);
  for (uint32_t h = 0; h < hosts; ++h) win_start_[h + 1] = win_start_[h] + per_host[h + 1];
  std::vector<uint64_t> next(win_start_.begin(), win_start_.end() - 1);
  start_.resize(n);
  len_.assign(bytes.begin(), bytes.end());
  src_off_.assign(src_offset.begin(), src_offset.end());
  for (size_t i = 0; i < n; ++i) {
    start_[i] = next[dst[i]];
    next[dst[i]] += bytes[i];
  }
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = i;
  std::sort(order_.begin(), order_.end(),
            [&](uint64_t a, uint64_t b) { return start_[a] < start_[b]; });
  sorted_start_.resize(n);
  for (size_t i = 0; i < n; ++i) sorted_start_[i] = start_[order_[i]];
  tally_.assign(n, Tally{});
  reserved_ = std::max<uint64_t>(win_start_[hosts], 1) + 4096;
  void* p =
      ::mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mrc-sim: cannot reserve the sink's address range");
  base_ = static_cast<uint8_t*>(p);
}

void VerifySink::activate() { g_active = this; }

void VerifySink::copy(void* dst, const void* src, size_t n) {
  VerifySink* s = g_active;
  auto* d = static_cast<uint8_t*>(dst);
  if (s && d >= s->base_ && d < s->base_ + s->reserved_)
    return s->verify(d, static_cast<const uint8_t*>(src), n);
  std::memcpy(dst, src, n);
}

void VerifySink::verify(uint8_t* dst, const uint8_t* src, size_t n) {
  const uint64_t off = static_cast<uint64_t>(dst - base_);
  auto it = std::upper_bound(sorted_start_.begin(), sorted_start_.end(), off);
  if (it == sorted_start_.begin()) return void(++bad_);
  const uint64_t i = order_[static_cast<size_t>(it - sorted_start_.begin()) - 1];
  const uint64_t x = off - start_[i];  // offset in the message
  Tally& t = tally_[i];
  if (x + n > len_[i] || std::memcmp(src, source_.data() + src_off_[i] + x, n) != 0) {
    ++t.bad;
    ++bad_;
    return;
  }
  t.bytes += n;
  t.sum += sum1(x + n) - sum1(x);
  t.sum2 += sum2(x + n) - sum2(x);
  placed_ += n;
}

VerifySink::Verdict VerifySink::check(uint64_t i) const {
  const Tally& t = tally_[i];
  const uint64_t len = len_[i];
  if (t.bad) return Verdict::kCorrupted;
  if (t.bytes < len) return Verdict::kLost;
  if (t.bytes > len) return Verdict::kDuplicated;
  if (t.sum != sum1(len) || t.sum2 != sum2(len))
    return Verdict::kDuplicated;  // some twice, some never
  return Verdict::kOk;
}

const char* to_string(VerifySink::Verdict v) {
  switch (v) {
    case VerifySink::Verdict::kOk:
      return "ok";
    case VerifySink::Verdict::kLost:
      return "lost";
    case VerifySink::Verdict::kDuplicated:
      return "duplicated";
    case VerifySink::Verdict::kCorrupted:
      return "corrupted";
  }
  return "?";
}

}  // namespace mrc::msim
