// EV field rules: check, expand, generate (ev_fields.h).
#include "api/ev_fields.h"

#include <bit>
#include <cstring>

namespace mrc::ocp {
namespace {

constexpr uint32_t kEvBits = MRC_CTL_EV_MAX_BYTES * 8;

uint64_t all_ones(uint32_t bits) { return bits >= 32 ? 0xffffffffull : (1ull << bits) - 1; }

// Bits [at, at + n) of a big-endian bit string, as a number (n <= 32).
uint32_t get_bits(const uint8_t* s, uint32_t at, uint32_t n) {
  uint32_t v = 0;
  for (uint32_t b = at; b < at + n; ++b) v = v << 1 | ((s[b / 8] >> (7 - b % 8)) & 1u);
  return v;
}

// Writes the low n bits of v at bits [at, at + n) of a big-endian bit string (n <= 32).
void put_bits(uint8_t* s, uint32_t at, uint32_t n, uint32_t v) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t b = at + i;
    const auto bit = static_cast<uint8_t>(1u << (7 - b % 8));
    if ((v >> (n - 1 - i)) & 1u)
      s[b / 8] |= bit;
    else
      s[b / 8] &= static_cast<uint8_t>(~bit);
  }
}

// The k-bit number x laid into the set bits of mask, lowest first, over init.
uint32_t deposit(uint32_t init, uint32_t mask, uint32_t x) {
  uint32_t v = init & ~mask;
  for (uint32_t b = 0, k = 0; b < 32; ++b)
    if ((mask >> b) & 1u) v |= ((x >> k++) & 1u) << b;
  return v;
}

}  // namespace

std::string check_fields(const EvFields& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    const mrc_ctl_ev_field& f = fields[i];
    const std::string at = "field " + std::to_string(i) + ": ";
    if (f.width < 1 || f.width > 32) return at + "width " + std::to_string(f.width) + " (1..32)";
    if (f.init_val > all_ones(f.width)) return at + "init_val is wider than the field's width";
    if (f.mask > all_ones(f.width)) return at + "mask has bits outside the field's width";
    if (f.min_val > f.max_val) return at + "min_val is above max_val";
    if (f.max_val > all_ones(static_cast<uint32_t>(std::popcount(f.mask))))
      return at + "max_val is wider than the mask's " + std::to_string(std::popcount(f.mask)) +
             " bits";
  }
  return "";
}

std::string check_fields(const std::vector<uint8_t>& fmt, const EvFields& fields) {
  if (fields.size() > fmt.size())
    return std::to_string(fields.size()) + " fields, the EV format profile has " +
           std::to_string(fmt.size());
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].width > fmt[i])
      return "field " + std::to_string(i) + ": width " + std::to_string(fields[i].width) +
             " is wider than format field " + std::to_string(i) + " (" + std::to_string(fmt[i]) +
             " bits)";
  return check_fields(fields);
}

uint32_t ev_bits(const EvFields& fields) {
  uint32_t n = 0;
  for (const mrc_ctl_ev_field& f : fields) n += static_cast<uint32_t>(std::popcount(f.mask));
  return n;
}

bool expand(const std::vector<uint8_t>& fmt, const EvFields& fields, const uint8_t* ev,
            uint8_t* out, std::string* why) {
  const uint32_t used = ev_bits(fields);
  for (uint32_t b = used; b < kEvBits; ++b)
    if ((ev[b / 8] >> (7 - b % 8)) & 1u) {
      *why = "the EV has bit " + std::to_string(b) + " set; its fields take " +
             std::to_string(used) + " bits";
      return false;
    }
  std::memset(out, 0, MRC_CTL_EV_MAX_BYTES);
  uint32_t src = 0, dst = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const mrc_ctl_ev_field& f = fields[i];
    const auto k = static_cast<uint32_t>(std::popcount(f.mask));
    const uint32_t v = deposit(f.init_val, f.mask, get_bits(ev, src, k));
    src += k;
    // Right-aligned in the format field: its high (fmt - width) bits stay zero.
    const uint32_t w = fmt[i];
    put_bits(out, dst + w - f.width, f.width, v);
    dst += w;
  }
  return true;
}

uint64_t gen_combinations(const EvFields& fields) {
  uint64_t n = 1;
  for (const mrc_ctl_ev_field& f : fields) {
    if (f.mask == 0) continue;
    const unsigned __int128 m =
        static_cast<unsigned __int128>(n) * (uint64_t{f.max_val} - f.min_val + 1);
    if (m >= (1ull << 32)) return 1ull << 32;
    n = static_cast<uint64_t>(m);
  }
  return n;
}

void gen_ev(const EvFields& fields, uint64_t index, uint8_t* out) {
  std::memset(out, 0, MRC_CTL_EV_MAX_BYTES);
  uint32_t at = 0;
  for (const mrc_ctl_ev_field& f : fields) {
    if (f.mask == 0) continue;
    const auto k = static_cast<uint32_t>(std::popcount(f.mask));
    const uint64_t radix = uint64_t{f.max_val} - f.min_val + 1;
    put_bits(out, at, k, static_cast<uint32_t>(f.min_val + index % radix));
    index /= radix;
    at += k;
  }
}

}  // namespace mrc::ocp
