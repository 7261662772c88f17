// libFuzzer target: multicast member records (libmrc/src/verbs/mcast_record.h) on arbitrary
// text, as a sender reads them from a directory other machines write into. Parsing returns a
// record or an error, never crashes; what it accepts encodes to text that parses back to the
// same text.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "verbs/mcast_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = mrc::verbs::parse_mcast_record(text);
  if (!r) return 0;
  const std::string once = mrc::verbs::encode_mcast_record(*r);
  auto again = mrc::verbs::parse_mcast_record(once);
  if (!again || mrc::verbs::encode_mcast_record(*again) != once) std::abort();
  (void)mrc::verbs::mcast_record_name(*r);
  return 0;
}
