// The fault language of the namespace fabric, shared by `mrc-fabric fault` and mrc-perf
// schedules: parse a fault from words, print it back. Threading: free functions, no state.
//
// Words separated by spaces (numbers are decimal):
//   targets   switch:  t0 p<P> t<T>     T0 T of plane P
//                      t0 h<H> p<P>     the T0 above host H in plane P
//                      t1 p<P> s<S>     spine S of plane P
//             link:    link p<P> t<T> s<S>   the cable from T0 T to spine S in plane P
//                      link h<H> p<P>        host H's port on plane P (to its T0)
//   faults    down <switch|link>      every link of a switch, or the link, admin down on
//             up <switch|link>        both veth ends; up restores (routes re-programmed)
//             blackhole <switch>      drop everything the switch forwards; links stay up
//             unblackhole <switch>
//             loss <link> <percent>   drop that share of packets leaving either end of the
//                                     link (0..100, two decimals; "%" allowed; 0 removes);
//                                     neighbour discovery is exempt
//             flap <link> <period_ms> down for period/2, up for period/2, until unflap
//             unflap <link>           stops flapping and leaves the link up
//             Gray failures (the link stays up; 0 removes each, as for loss):
//             loss <link> <percent> up|down   one direction only: "up" leaves the end nearer
//                                     the hosts (host -> T0, T0 -> spine), "down" the other
//             blackhole <link> [up|down]  drop everything but neighbour discovery on the link
//                                     (one direction, or both): loss 100, kept as its own fault
//             degrade <link> <gbps>   both ends send at most <gbps> (tbf; a host link's port
//                                     rate comes back with 0, an uplink is unshaped again)
//             delay <link> <us>       every packet leaving either end waits <us> more
//                                     (1..1000000): the round trip over the link grows by 2 x us
//             corrupt <link> <percent>  that share of IPv6 UDP/TCP packets leaving either end
//                                     gets one payload bit flipped where the UDP checksum is
//                                     zero (MRC with zero checksums: its CRCs must catch it);
//                                     a packet that carries a checksum is dropped instead, as
//                                     the receiver's checksum check would drop it
//             reorder <link> <percent> [<us>]  that share of packets leaving either end is held
//                                     <us> (default 200) while the others pass: they overtake
//             trim <link> <gbps> [<trim_kb> [<ecn_kb>]]
//                                     the link's upper end (the T0 of a host link, the spine
//                                     of an uplink) trims and marks on egress as a port of
//                                     <gbps> would (trim.h): past trim_kb KiB of virtual queue
//                                     MRC data packets are cut to their header (default 64),
//                                     past ecn_kb KiB ECN-capable packets get CE (default 16).
//                                     Hosts must send with zero UDP checksums (mrc-perf --trim)
//             untrim <link>           removes the trimming program
// parse_fault checks the grammar only; NsFabric::apply checks the numbers against a fabric
// ("t0 p9 t0: plane 9 out of range (fabric has 4 planes)"). Parse errors name the bad word:
// "expected p<N> after t1, got 'x'".
//
// Fault is a variant: element faults (links and switches) and the trimming fault.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::nsfabric {

// tc keeps a tbf burst as time in its clock's ticks: above this rate the fabric's burst
// (nsfabric.h kTbfBurstBytes) rounds down to too few bytes for a 64 KiB packet. The most a
// port is shaped to (its built rate or a `degrade`); tc takes whole bits per second, so the
// least a `degrade` takes is kMinShapedGbps (1 kbit/s).
inline constexpr double kMaxShapedGbps = 800;
inline constexpr double kMinShapedGbps = 1e-6;

struct Target {
  enum class Kind : uint8_t {
    kT0,        // t0 p<plane> t<t0>
    kT0OfHost,  // t0 h<host> p<plane>
    kT1,        // t1 p<plane> s<spine>
    kUplink,    // link p<plane> t<t0> s<spine>
    kHostLink,  // link h<host> p<plane>
  };
  Kind kind = Kind::kT0;
  uint32_t plane = 0;
  uint32_t t0 = 0;     // kT0, kUplink
  uint32_t spine = 0;  // kT1, kUplink
  uint32_t host = 0;   // kT0OfHost, kHostLink

  bool is_switch() const {
    return kind == Kind::kT0 || kind == Kind::kT0OfHost || kind == Kind::kT1;
  }
  bool operator==(const Target&) const = default;
};

enum class Action : uint8_t {
  kDown,
  kUp,
  kBlackhole,
  kUnblackhole,
  kLoss,
  kFlap,
  kUnflap,
  kDegrade,
  kDelay,
  kCorrupt,
  kReorder,
};

// Which way along a link a loss or link blackhole acts. kUp: leaving the end nearer the hosts
// (host -> T0 on a host link, T0 -> spine on an uplink); kDown: the other way.
enum class Direction : uint8_t { kBoth, kUp, kDown };

// A fault on one switch or link.
struct ElementFault {
  Action action = Action::kDown;
  Target target;
  double loss_pct = 0;     // kLoss, kCorrupt, kReorder: 0..100, in steps of 0.01
  uint32_t period_ms = 0;  // kFlap: >= kMinFlapPeriodMs
  Direction dir = Direction::kBoth;  // kLoss, and kBlackhole / kUnblackhole of a link
  double gbps = 0;                   // kDegrade: > 0, or 0 (restore)
  uint32_t us = 0;                   // kDelay: added delay; kReorder: how long held; <= kMaxDelayUs
};

inline constexpr uint32_t kMinFlapPeriodMs = 20;
inline constexpr uint32_t kMaxDelayUs = 1000000;
inline constexpr uint32_t kDefaultReorderUs = 200;

// trim / untrim on a link's upper end.
struct TrimFault {
  bool on = true;  // false: untrim
  Target target;   // a link
  double gbps = 0;
  uint32_t trim_kb = 64;
  uint32_t ecn_kb = 16;
};

using Fault = std::variant<ElementFault, TrimFault>;

Result<Fault, std::string> parse_fault(std::string_view text);

// The words parse_fault reads back to the same fault ("down t0 h0 p2", "loss link p0 t0 s1 0.5").
std::string to_string(const Target& t);
std::string to_string(const Fault& f);

// What repairs whatever `schedule` leaves broken: for each target (in first-seen order) whose
// last fault is a break (down, blackhole, loss > 0, flap, trim), the fault that undoes it
// (up, unblackhole, loss 0, unflap, untrim, degrade/delay/corrupt/reorder 0). Targets are
// compared as written, with the direction of a one-way loss or link blackhole.
std::vector<Fault> repairs(const std::vector<Fault>& schedule);

}  // namespace mrc::nsfabric
