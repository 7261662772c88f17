// EV field rules of OCP MRC EV profiles (mrc_ctl.h, struct mrc_ctl_ev_field): checking a
// profile's fields against its EV format profile, expanding an EV through them into the bits
// a packet carries, and generating the EVs of a generated (GEN) profile. Pure functions, no
// state; safe from any thread.
//
// Expansion (mrc_ctl.h "EV expansion steps per field", as the OCP repository's
// examples/ev_expansion/ev_expansion.c works it): an EV is a bit string read most significant
// bit first from val[0]. Field i starts as init_val; if its mask has k bits set, the next k
// bits of the EV form a k-bit number whose bits go, lowest first, into the mask's set bits,
// lowest first. The field's value is then written right-aligned into format field i's width
// (extra high bits zero) and the format fields are concatenated, MSB first from out[0];
// format fields past the profile's last field stay zero. An EV with a bit set past the bits
// the fields take is refused.
//
// Generation: a GEN profile's EVs are those bit strings whose field values (the k bits each
// masked field takes, as a number) lie in [min_val, max_val]; libmrc enumerates them in mixed
// radix with field 0 varying fastest, and hands EV i to port (i mod ports) + 1 with
// combination i / ports, so every port gets the same distinct combinations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mrc/mrc_ctl.h"

namespace mrc::ocp {

using EvFields = std::vector<mrc_ctl_ev_field>;

/// Why fields alone break mrc_ctl.h's rules (init_val or mask wider than width, max_val wider
/// than the mask's bits, min_val above max_val, width 0 or above 32); "" if they do not.
std::string check_fields(const EvFields& fields);

/// Why fields do not fit format field widths `fmt` (more fields than format fields, a field
/// wider than its format field, rules of check_fields); "" if they fit.
std::string check_fields(const std::vector<uint8_t>& fmt, const EvFields& fields);

/// Bits an EV of these fields has: the sum of the masks' set bits.
uint32_t ev_bits(const EvFields& fields);

/// The expansion of EV `ev` (MRC_CTL_EV_MAX_BYTES bytes) into `out` (as many); false and
/// *why if `ev` has bits set past ev_bits(fields). Fields must pass check_fields(fmt, fields).
bool expand(const std::vector<uint8_t>& fmt, const EvFields& fields, const uint8_t* ev,
            uint8_t* out, std::string* why);

/// Distinct EVs the fields generate: the product over masked fields of (max - min + 1),
/// saturated at 2^32.
uint64_t gen_combinations(const EvFields& fields);

/// Generated EV `index` (< gen_combinations) into `out` (MRC_CTL_EV_MAX_BYTES, zeroed here).
void gen_ev(const EvFields& fields, uint64_t index, uint8_t* out);

}  // namespace mrc::ocp
