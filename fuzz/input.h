// A cursor over a fuzzer's input: takes integers and byte runs, returns zeros once empty.
// Threading: a plain value, one per fuzz iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace mrc::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  template <class T>
  T take() {
    T v{};
    const size_t k = n_ < sizeof(T) ? n_ : sizeof(T);
    std::memcpy(&v, p_, k);
    p_ += k;
    n_ -= k;
    return v;
  }
  std::span<const uint8_t> bytes(size_t want) {
    const size_t k = want < n_ ? want : n_;
    std::span<const uint8_t> s(p_, k);
    p_ += k;
    n_ -= k;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace mrc::fuzz
