// libFuzzer target: the wire decoder on arbitrary datagrams. A datagram that decodes must
// re-encode to a header that decodes to the same fields (the decoder accepts nothing the
// encoder would not write), and nothing may read out of bounds.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "mrc/wire/wire.h"

using namespace mrc::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Packet p;
  if (!decode({data, size}, p).ok()) return 0;
  if (!is_data(p.common.kind) || p.trimmed) return 0;
  // Round trip: encode the decoded header with its payload, decode again, compare.
  std::vector<uint8_t> out(header_size(p.common.kind) + p.payload.size());
  Packet q = p;
  q.data.payload_len = static_cast<uint16_t>(p.payload.size());
  const size_t h = encode_header(q, p.payload, out);
  std::copy(p.payload.begin(), p.payload.end(), out.begin() + h);
  Packet r;
  if (!decode(out, r).ok()) std::abort();
  if (r.common.psn != p.common.psn || r.common.kind != p.common.kind ||
      r.data.offset != p.data.offset || r.payload.size() != p.payload.size())
    std::abort();
  return 0;
}
