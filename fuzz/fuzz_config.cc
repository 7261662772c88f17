// libFuzzer target: the two configuration parsers on arbitrary text. The fabric file must
// round-trip (what load() accepts, dump() writes back to an equal description); the host
// configuration must return a value or an error, never crash or throw.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mrc/io/config.h"
#include "srv6/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto f = mrc::srv6::load(text); f.ok()) {
    const std::string again = mrc::srv6::dump(*f);
    auto g = mrc::srv6::load(again);
    if (!g.ok() || mrc::srv6::dump(*g) != again) std::abort();
  }
  const mrc::io::Getenv no_env = [](const char*) -> std::optional<std::string> { return {}; };
  (void)mrc::io::parse_host_config(text, "fuzz", no_env);
  return 0;
}
