// libFuzzer target: the NCCL plugin's control frames (nccl-plugin/src/control.h), which any
// host that reaches a listen comm can send. decode() must return a frame or an error, never
// crash; a decoded frame must encode back to the same bytes. The same bytes then go through
// a non-blocking socket pair into Stream::read_frame, which assembles frames from pieces.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "control.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mrc::nccl;
  std::span<const uint8_t> in(data, size);
  if (auto f = decode(in); f.ok()) {
    const auto again = encode(*f);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return 0;
  const size_t n = std::min<size_t>(size, 64 << 10);
  if (n > 0 && ::write(sv[1], data, n) < 0) std::abort();
  ::close(sv[1]);  // the peer "closes" after its bytes: the stream must end in an error
  Stream s{mrc::UniqueFd(sv[0])};
  for (int i = 0; i < 1000; ++i) {
    auto f = s.read_frame();
    if (!f.ok()) break;
    if (!*f) break;
    (void)encode(**f);
  }
  return 0;
}
