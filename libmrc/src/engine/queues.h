// The engine's queue containers (rings addressed by sequence number, small FIFOs) and the
// piece of local memory a message's scatter/gather list names. Shared by the send and receive
// state (send_state.h, recv_state.h).
// Threading: plain value types, owned by one QP (engine thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace mrc::engine {

/// A contiguous piece of local memory a message reads from or writes to.
struct Seg {
  uint8_t* host = nullptr;
  uint32_t len = 0;
  uint32_t key = 0;  // the MR it lies in; checked before every use (deregistered: refused)
};

/// A send WQE's scatter/gather list: its first segment inside the list, more on an allocation
/// of their own. Most work requests name one segment, so posting one writes no line outside
/// its WQE: with thousands of QPs, each cold when it posts, a list elsewhere was one more miss
/// per message, and one that could only start once the WQE's line was there (its pointer is in
/// it). 32 bytes. clear() keeps the allocation (a WQE slot is reused).
class SgList {
 public:
  SgList() = default;
  // Moves leave the source empty (one segment's room, no allocation).
  SgList(SgList&& o) noexcept
      : one_(o.one_),
        more_(std::move(o.more_)),
        n_(std::exchange(o.n_, 0)),
        cap_(std::exchange(o.cap_, 1)) {}
  SgList& operator=(SgList&& o) noexcept {
    one_ = o.one_;
    more_ = std::move(o.more_);
    n_ = std::exchange(o.n_, 0);
    cap_ = std::exchange(o.cap_, 1);
    return *this;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Seg* data() { return cap_ > 1 ? more_.get() : &one_; }
  const Seg* data() const { return cap_ > 1 ? more_.get() : &one_; }
  const Seg* begin() const { return data(); }
  const Seg* end() const { return data() + n_; }
  const Seg& operator[](size_t i) const { return data()[i]; }
  operator std::span<const Seg>() const { return {data(), n_}; }
  void clear() { n_ = 0; }
  void push_back(const Seg& g) {
    if (n_ == cap_) grow();
    data()[n_++] = g;
  }

 private:
  void grow() {
    const size_t c = std::max<size_t>(4, 2 * size_t{cap_});
    auto bigger = std::make_unique<Seg[]>(c);
    if (cap_ == 1) {
      bigger[0] = one_;  // full: n_ is 1
    } else {
      for (uint32_t i = 0; i < n_; ++i) bigger[i] = more_[i];
    }
    more_ = std::move(bigger);
    cap_ = static_cast<uint32_t>(c);
  }

  Seg one_;                     // the list while cap_ is 1
  std::unique_ptr<Seg[]> more_;  // the list while cap_ > 1
  uint32_t n_ = 0;
  uint32_t cap_ = 1;  // 1: one_; more: more_'s length
};
static_assert(sizeof(SgList) == 32);

/// Ring of WQEs addressed by absolute sequence number, holding at most `capacity`
/// (full() past it). Storage grows on demand (powers of two, up to the capacity
/// rounded up), so a queue that is never used costs no memory. Only the live
/// range [head, tail) is kept across growth; next() is the slot at tail (valid
/// until the next push or growth), filled before push() makes it live.
/// 32 bytes (a pointer and its length, not a std::vector's three pointers): the send block
/// holds two of these and the receive block one, each read per packet (Qp's layout).
template <typename T>
class SeqRing {
 public:
  SeqRing() = default;
  // Moves leave the source empty (as a moved-from std::vector was), never a null buffer
  // with a length.
  SeqRing(SeqRing&& o) noexcept
      : slots_(std::move(o.slots_)),
        n_(std::exchange(o.n_, 0)),
        cap_(o.cap_),
        head_(std::exchange(o.head_, 0)),
        tail_(std::exchange(o.tail_, 0)) {}
  SeqRing& operator=(SeqRing&& o) noexcept {
    slots_ = std::move(o.slots_);
    n_ = std::exchange(o.n_, 0);
    cap_ = o.cap_;
    head_ = std::exchange(o.head_, 0);
    tail_ = std::exchange(o.tail_, 0);
    return *this;
  }
  void init(uint32_t capacity) {
    slots_.reset();
    n_ = 0;
    cap_ = capacity;
    head_ = tail_ = 0;
  }
  bool full() const { return tail_ - head_ >= cap_; }
  bool empty() const { return tail_ == head_; }
  uint64_t size() const { return tail_ - head_; }
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  /// Storage slots allocated (memory accounting).
  size_t slots() const { return n_; }
  T& at(uint64_t seq) { return slots_[seq & (n_ - 1)]; }
  const T& at(uint64_t seq) const { return slots_[seq & (n_ - 1)]; }
  T& next() {
    if (tail_ - head_ >= n_) grow();
    return at(tail_);
  }
  T& push() {
    T& t = next();
    ++tail_;
    return t;
  }
  void pop() { ++head_; }
  void clear() { head_ = tail_; }

 private:
  void grow() {
    const uint32_t n = n_ == 0 ? 1 : 2 * n_;
    auto bigger = std::make_unique<T[]>(n);
    for (uint64_t s = head_; s != tail_; ++s) bigger[s & (n - 1)] = std::move(at(s));
    slots_ = std::move(bigger);
    n_ = n;
  }

  std::unique_ptr<T[]> slots_;  // n_ slots (null while n_ is 0)
  uint32_t n_ = 0;              // 0 or a power of two
  uint32_t cap_ = 0;
  uint64_t head_ = 0, tail_ = 0;
};
static_assert(sizeof(SeqRing<uint64_t>) == 32);

/// FIFO of small values (PSNs, WQE sequence numbers): a ring that allocates on
/// its first push and grows by doubling. (std::deque allocates on construction.)
/// 24 bytes: head and tail are 32-bit counts that wrap (the length is a power of two, so
/// the masked index and tail - head stay right across the wrap).
template <typename T>
class Fifo {
 public:
  Fifo() = default;
  // Moves leave the source empty, never a null buffer with a length.
  Fifo(Fifo&& o) noexcept
      : buf_(std::move(o.buf_)),
        n_(std::exchange(o.n_, 0)),
        head_(std::exchange(o.head_, 0)),
        tail_(std::exchange(o.tail_, 0)) {}
  Fifo& operator=(Fifo&& o) noexcept {
    buf_ = std::move(o.buf_);
    n_ = std::exchange(o.n_, 0);
    head_ = std::exchange(o.head_, 0);
    tail_ = std::exchange(o.tail_, 0);
    return *this;
  }
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (n_ - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (n_ - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  void push_back(const T& v) {
    if (size() == n_) grow();
    buf_[tail_++ & (n_ - 1)] = v;
  }
  void pop_front() { ++head_; }
  /// Removes element i, keeping the order of the others.
  void erase(size_t i) {
    for (size_t k = i; k + 1 < size(); ++k) (*this)[k] = (*this)[k + 1];
    --tail_;
  }
  void clear() { head_ = tail_ = 0; }
  size_t capacity() const { return n_; }

 private:
  void grow() {
    const uint32_t n = n_ == 0 ? 4 : 2 * n_;
    auto bigger = std::make_unique<T[]>(n);
    const uint32_t k = tail_ - head_;
    for (uint32_t i = 0; i < k; ++i) bigger[i] = (*this)[i];
    buf_ = std::move(bigger);
    n_ = n;
    head_ = 0;
    tail_ = k;
  }

  std::unique_ptr<T[]> buf_;  // n_ slots (null while n_ is 0)
  uint32_t n_ = 0;            // 0 or a power of two
  uint32_t head_ = 0, tail_ = 0;
};
static_assert(sizeof(Fifo<uint64_t>) == 24);

}  // namespace mrc::engine
