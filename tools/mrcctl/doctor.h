// mrcctl doctor: checks a host before an MRC job, one verdict per line. Threading: run_doctor
// runs on the caller's thread (it starts and stops one UdpDriver of its own for the probes).
//
// What it checks, from the host configuration every front end reads (io/config.h:
// $MRC_CONFIG, else /etc/mrc/mrc.json, then MRC_* variables):
//   config    the configuration loads (a bad file FAILs with the loader's error);
//   per plane port (its configured address):
//     address   the address is on an interface that is up and has a carrier;
//     route     the way to the peer's paths (srv6: every path of the fabric toward the
//               peer; ecmp/direct: the peer's plane address; no peer: the plane's block in
//               srv6, else not checked) leaves by that plane's interface (`ip -6 route get
//               DST from ADDR`);
//     mtu       the interface MTU carries an MRC packet: mtu + 72 (MRC data header) + 8
//               (UDP) + 40 (IPv6) bytes;
//     offload   UDP GSO (tx-udp-segmentation) and GRO (generic-receive-offload) are on
//               when the configuration uses them (`ethtool -k`; warn only);
//     port      the UDP port is free on the address (bind() succeeds; the holder is named
//               when /proc shows it);
//     probe     with a peer: every path on the plane answers connectionless probes
//               (io/udp/probes.h, what `mrcctl probe` sends): all ok, some silent warn,
//               none FAIL. The peer must run libmrc: an MRC job or `mrcctl doctor --listen`;
//   host-wide:
//     clock     the clock source (tsc, kvm-clock ok; others warn: slow clock reads);
//     cpu       the frequency governor of every CPU (performance ok; others warn);
//     buffers   net.core.rmem_max / wmem_max against the socket buffers MRC asks for;
//     busy_poll net.core.busy_read / busy_poll, MRC's own busy_poll and spin (information).
// Verdicts: ok, warn (works, slower or riskier), FAIL (a job would fail or lose a plane),
// each with what was seen and, when not ok, what to do. Exit status (doctor_exit): 0 when no
// line FAILs, 1 otherwise; bad arguments are errors of run_doctor (mrcctl exits 2).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "view.h"

namespace mrc::mrcctl {

enum class Verdict : uint8_t { kOk, kWarn, kFail };
const char* to_string(Verdict v);  // "ok", "warn", "FAIL"

struct Check {
  std::string name;  // "address", "route", ...
  int plane = -1;    // -1: host-wide
  Verdict verdict = Verdict::kOk;
  std::string detail;  // what was seen
  std::string fix;     // what to do (empty when ok)
};

struct DoctorOptions {
  std::string peer;            // srv6: h<N>, <N> or a fabric name; else addresses a,b,...
  uint32_t count = 3;          // probes per path
  uint32_t timeout_ms = 1000;  // wait for replies after the last probe
  double listen_s = 0;         // afterwards, answer probes this long (the peer side)
};

/// Runs every check and hands them to `report` (before --listen starts answering); returns
/// them too. Errors: bad options or a peer that is no host of the fabric (mrcctl prints them
/// and exits 2). A configuration that does not load is a FAIL line, not an error.
Result<std::vector<Check>, std::string> run_doctor(
    const DoctorOptions& o, const std::function<void(const std::vector<Check>&)>& report = {});

Json doctor_json(const std::vector<Check>& checks);  // {"checks": [...], "fail": n, "warn": n}
Table doctor_table(const std::vector<Check>& checks);
int doctor_exit(const std::vector<Check>& checks);  // 0: no FAIL; 1: a FAIL

// Parsers of the tools' output, for tests.
/// "on"/"off" of `feature` in `ethtool -k` output ("tx-udp-segmentation: on [fixed]").
std::optional<bool> ethtool_feature(const std::string& text, const std::string& feature);
/// The device of `ip -6 -o route get` output ("... dev p0h0 table 254 ..."); "" if none.
std::string route_dev(const std::string& text);

}  // namespace mrc::mrcctl
