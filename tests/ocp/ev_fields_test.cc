// EV field rules (libmrc/src/api/ev_fields.h) against the worked cases of the OCP repository's
// examples/ev_expansion/ev_expansion.c: its ten example profiles, each EV as that program
// prints it ("evs:", the bytes from val[0]) with the expansion it prints ("EXPANDED EVs:"),
// for the EVs its srandom(0) run draws (glibc). The values below are copied from that output.
#include "api/ev_fields.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace mrc::ocp {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes hex(const std::string& s) {
  Bytes b(MRC_CTL_EV_MAX_BYTES, 0);
  for (size_t i = 0; i + 1 < s.size() && i / 2 < b.size(); i += 2)
    b[i / 2] = static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16));
  return b;
}

Bytes expanded(const std::vector<uint8_t>& fmt, const EvFields& f, const std::string& ev) {
  EXPECT_EQ(check_fields(fmt, f), "");
  const Bytes in = hex(ev);
  Bytes out(MRC_CTL_EV_MAX_BYTES, 0xee);
  std::string why;
  EXPECT_TRUE(expand(fmt, f, in.data(), out.data(), &why)) << why;
  return out;
}

mrc_ctl_ev_field field(uint32_t width, uint32_t init, uint32_t min, uint32_t max, uint32_t mask) {
  return mrc_ctl_ev_field{width, init, min, max, mask};
}

EvFields same(size_t n, mrc_ctl_ev_field f) { return EvFields(n, f); }

// ev_expansion.c stev_exp / stev_gen_1: two 16-bit fields taken whole.
TEST(ExpandEv, StevTwoWholeFields) {
  const EvFields f = same(2, field(16, 0, 0, 0, 0xffff));
  EXPECT_EQ(expanded({16, 16}, f, "f3b04256"), hex("f3b04256"));
  EXPECT_EQ(expanded({16, 16}, f, "c7238d56"), hex("c7238d56"));
  EXPECT_EQ(expanded({16, 16}, f, "32250009"), hex("32250009"));  // stev_gen_1 EV 02
}

// stev_gen_2: one 32-bit field taken whole.
TEST(ExpandEv, StevOne32BitField) {
  const EvFields f = {field(32, 0, 0, 0, 0xffffffff)};
  EXPECT_EQ(expanded({32}, f, "67fb6a4e"), hex("67fb6a4e"));
  EXPECT_EQ(expanded({32}, f, "0e509b51"), hex("0e509b51"));
}

// stev_gen_with_fixed: fields init (i + 1) << 8, 4 generated bits each (mask 0xf).
TEST(ExpandEv, StevGeneratedWithFixed) {
  const EvFields f = {field(16, 0x100, 1, 0xf, 0xf), field(16, 0x200, 1, 0xf, 0xf)};
  EXPECT_EQ(expanded({16, 16}, f, "a4"), hex("010a0204"));
  EXPECT_EQ(expanded({16, 16}, f, "7f"), hex("0107020f"));
  EXPECT_EQ(expanded({16, 16}, f, "c4"), hex("010c0204"));
}

// stev_gen_with_fixed_weird_mask: init (i + 1) << 12, 8 generated bits in mask 0x0f0f.
TEST(ExpandEv, StevGeneratedSplitMask) {
  const EvFields f = {field(16, 0x1000, 1, 0xff, 0x0f0f), field(16, 0x2000, 1, 0xff, 0x0f0f)};
  EXPECT_EQ(expanded({16, 16}, f, "3312"), hex("13032102"));
  EXPECT_EQ(expanded({16, 16}, f, "e33e"), hex("1e03230e"));
  EXPECT_EQ(expanded({16, 16}, f, "97fa"), hex("19072f0a"));
}

// srv6_exp: a fixed 32-bit locator, four 16-bit uSIDs taken whole.
TEST(ExpandEv, Srv6ExplicitLocatorAndUsids) {
  EvFields f = {field(32, 0xcafecafe, 0, 0, 0)};
  for (int i = 0; i < 4; ++i) f.push_back(field(16, 0, 0, 0, 0xffff));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "43ba48d6a43de086"), hex("cafecafe43ba48d6a43de086"));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "be7e9b424d580239"), hex("cafecafebe7e9b424d580239"));
}

// srv6_exp_subset: three fields over a five-field format (the last two stay zero).
TEST(ExpandEv, Srv6FewerFieldsThanFormat) {
  const EvFields f = {field(32, 0xdeaddead, 0, 0, 0), field(16, 0, 0, 0, 0xffff),
                      field(16, 0, 0, 0, 0xffff)};
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "e298f115"), hex("deaddeade298f115"));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "12c5ce9a"), hex("deaddead12c5ce9a"));
}

// srv6_gen: 4-bit fields in 16-bit format fields (right-aligned, high bits zero).
TEST(ExpandEv, Srv6GeneratedNarrowFields) {
  EvFields f = {field(32, 0x42424242, 0, 0, 0)};
  for (int i = 0; i < 4; ++i) f.push_back(field(4, 0, 1, 0xf, 0xf));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "78ba"), hex("4242424200070008000b000a"));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "ff29"), hex("42424242000f000f00020009"));
}

// srv6_gen_with_fixed: uSIDs i << 8 with 4 generated bits.
TEST(ExpandEv, Srv6GeneratedWithFixed) {
  EvFields f = {field(32, 0x13131313, 0, 0, 0)};
  for (uint32_t i = 1; i < 5; ++i) f.push_back(field(16, i << 8, 1, 0xf, 0xf));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "9b79"), hex("131313130109020b03070409"));
  EXPECT_EQ(expanded({32, 16, 16, 16, 16}, f, "3e8c"), hex("131313130103020e0308040c"));
}

// srv6_srh_exp: SRv6 address and SRH segment, 224 bits.
TEST(ExpandEv, Srv6WithSrhSegment) {
  EvFields f = {field(32, 0xcafecafe, 0, 0, 0)};
  for (int i = 0; i < 6; ++i) f.push_back(field(16, 0, 0, 0, 0xffff));
  f.push_back(field(32, 0xdecafbad, 0, 0, 0));
  for (int i = 0; i < 2; ++i) f.push_back(field(16, 0, 0, 0, 0xffff));
  const std::vector<uint8_t> fmt = {32, 16, 16, 16, 16, 16, 16, 32, 16, 16};
  EXPECT_EQ(expanded(fmt, f, "b8a7310e14c80962ae4b9dd6587a4c16"),
            hex("cafecafeb8a7310e14c80962ae4b9dd6decafbad587a4c16"));
}

// ev_expansion.c verify_unused_bits_zero: an EV with bits past its fields' is refused.
TEST(ExpandEv, BitsPastTheFieldsAreRefused) {
  const EvFields f = {field(16, 0x100, 1, 0xf, 0xf), field(16, 0x200, 1, 0xf, 0xf)};
  const Bytes in = hex("a480");
  Bytes out(MRC_CTL_EV_MAX_BYTES);
  std::string why;
  EXPECT_FALSE(expand({16, 16}, f, in.data(), out.data(), &why));
  EXPECT_NE(why.find("bit 8"), std::string::npos) << why;
}

// ev_expansion.c check_profs and mrc_ctl.h's restrictions, one broken at a time.
TEST(CheckFields, RulesOfTheSpec) {
  const mrc_ctl_ev_field ok = field(16, 0x100, 1, 0xf, 0xf);
  EXPECT_EQ(check_fields({16, 16}, {ok, ok}), "");
  EXPECT_NE(check_fields({16}, {ok, ok}), "");                // more fields
  EXPECT_NE(check_fields({8, 8}, {ok}), "");                  // wider than format
  EXPECT_NE(check_fields({field(8, 0x100, 0, 0, 0)}), "");    // init_val too wide
  EXPECT_NE(check_fields({field(8, 0, 0, 0, 0x1f0)}), "");    // mask outside width
  EXPECT_NE(check_fields({field(16, 0, 0, 0x10, 0xf)}), "");  // max_val > mask bits
  EXPECT_NE(check_fields({field(16, 0, 5, 4, 0xf)}), "");     // min above max
  EXPECT_NE(check_fields({field(0, 0, 0, 0, 0)}), "");        // width 0
  EXPECT_NE(check_fields({field(33, 0, 0, 0, 0)}), "");       // width above 32
  EXPECT_EQ(check_fields({field(32, 0xffffffff, 0, 0xffffffff, 0xffffffff)}), "");
}

// Generation: field 0 varies fastest, each field's value within [min_val, max_val].
TEST(GenEv, MixedRadixFieldZeroFastest) {
  const EvFields f = {field(32, 0x13131313, 0, 0, 0), field(16, 0x100, 1, 3, 0xf),
                      field(16, 0x200, 2, 3, 0x0f0f)};
  EXPECT_EQ(gen_combinations(f), 3u * 2u);
  EXPECT_EQ(ev_bits(f), 4u + 8u);
  Bytes ev(MRC_CTL_EV_MAX_BYTES);
  gen_ev(f, 0, ev.data());
  EXPECT_EQ(ev, hex("1020"));  // field 1 = 1 (4 bits), field 2 = 2 (8 bits)
  gen_ev(f, 1, ev.data());
  EXPECT_EQ(ev, hex("2020"));
  gen_ev(f, 5, ev.data());
  EXPECT_EQ(ev, hex("3030"));
  Bytes out(MRC_CTL_EV_MAX_BYTES);
  std::string why;
  ASSERT_TRUE(expand({32, 16, 16}, f, ev.data(), out.data(), &why)) << why;
  // 3 into mask 0x0f0f: bits 0 and 1; init_val's bit 9 lies under the mask and is overwritten.
  EXPECT_EQ(out, hex("1313131301030003"));
}

TEST(GenEv, CombinationsSaturate) {
  EXPECT_EQ(gen_combinations(
                {field(32, 0, 0, 0xffffffff, 0xffffffff), field(32, 0, 0, 0xffffffff, 0xffffffff)}),
            1ull << 32);
  EXPECT_EQ(gen_combinations({field(8, 7, 0, 0, 0)}), 1u);  // only fixed fields: one EV
}

}  // namespace
}  // namespace mrc::ocp
