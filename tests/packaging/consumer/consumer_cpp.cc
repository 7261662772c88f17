// A C++ program outside the tree built against an installed libmrc's C++ API (tests/packaging):
// it includes the public headers as <mrc/...> (engine, UDP driver, host configuration, wire
// format), encodes a probe and decodes it back, and creates and polls a completion queue on an
// engine. Prints "mrc c++ api: probe psn 7, cq empty".
#include <mrc/engine/engine.h>
#include <mrc/io/config.h>
#include <mrc/io/udp/udp_driver.h>
#include <mrc/wire/wire.h>

#include <array>
#include <cstdint>
#include <cstdio>

int main() {
  mrc::wire::Packet probe;
  probe.common.kind = mrc::wire::Kind::kProbe;
  probe.common.psn = 7;
  std::array<uint8_t, mrc::wire::kMaxHeaderSize> buf{};
  size_t len = mrc::wire::encode_header(probe, {}, buf);
  auto back = mrc::wire::decode(std::span<const uint8_t>(buf.data(), len));
  if (!back.ok() || back->common.kind != mrc::wire::Kind::kProbe || back->common.psn != 7) {
    std::fprintf(stderr, "consumer_cpp: the probe did not decode back\n");
    return 1;
  }
  mrc::engine::Engine engine;
  auto cq = engine.create_cq(16);
  if (!cq.ok()) {
    std::fprintf(stderr, "consumer_cpp: create_cq failed\n");
    return 1;
  }
  std::array<mrc::engine::Completion, 4> out;
  size_t n = engine.poll_cq(*cq, out);
  // The UDP driver and the host configuration link too (not run: they need the host's planes).
  auto load = &mrc::io::load_host_config;
  if (load == nullptr) return 1;
  std::printf("mrc c++ api: probe psn %u, cq %s\n", back->common.psn,
              n == 0 ? "empty" : "not empty");
  return 0;
}
