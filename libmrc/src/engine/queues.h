// The engine's queue containers (rings addressed by sequence number, small FIFOs) and the
// piece of local memory a message's scatter/gather list names. Shared by the send and receive
// state (send_state.h, recv_state.h).
// Threading: plain value types, owned by one QP (engine thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mrc::engine {

/// A contiguous piece of local memory a message reads from or writes to.
struct Seg {
  uint8_t* host = nullptr;
  uint32_t len = 0;
  uint32_t key = 0;  // the MR it lies in; checked before every use (deregistered: refused)
};

/// Ring of WQEs addressed by absolute sequence number, holding at most `capacity`
/// (full() past it). Storage grows on demand (powers of two, up to the capacity
/// rounded up), so a queue that is never used costs no memory. Only the live
/// range [head, tail) is kept across growth; next() is the slot at tail (valid
/// until the next push or growth), filled before push() makes it live.
template <typename T>
class SeqRing {
 public:
  void init(uint32_t capacity) {
    slots_.clear();
    slots_.shrink_to_fit();
    cap_ = capacity;
    head_ = tail_ = 0;
  }
  bool full() const { return tail_ - head_ >= cap_; }
  bool empty() const { return tail_ == head_; }
  uint64_t size() const { return tail_ - head_; }
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  /// Storage slots allocated (memory accounting).
  size_t slots() const { return slots_.size(); }
  T& at(uint64_t seq) { return slots_[seq & (slots_.size() - 1)]; }
  const T& at(uint64_t seq) const { return slots_[seq & (slots_.size() - 1)]; }
  T& next() {
    if (tail_ - head_ >= slots_.size()) grow();
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
    const size_t n = slots_.empty() ? 1 : 2 * slots_.size();
    std::vector<T> bigger(n);
    for (uint64_t s = head_; s != tail_; ++s) bigger[s & (n - 1)] = std::move(at(s));
    slots_.swap(bigger);
  }

  std::vector<T> slots_;
  uint32_t cap_ = 0;
  uint64_t head_ = 0, tail_ = 0;
};

/// FIFO of small values (PSNs, WQE sequence numbers): a ring that allocates on
/// its first push and grows by doubling. (std::deque allocates on construction.)
template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  void push_back(const T& v) {
    if (size() == buf_.size()) grow();
    buf_[tail_++ & (buf_.size() - 1)] = v;
  }
  void pop_front() { ++head_; }
  /// Removes element i, keeping the order of the others.
  void erase(size_t i) {
    for (size_t k = i; k + 1 < size(); ++k) (*this)[k] = (*this)[k + 1];
    --tail_;
  }
  void clear() { head_ = tail_ = 0; }
  size_t capacity() const { return buf_.size(); }

 private:
  void grow() {
    const size_t n = buf_.empty() ? 4 : 2 * buf_.size();
    std::vector<T> bigger(n);
    for (size_t i = 0; i < size(); ++i) bigger[i] = (*this)[i];
    tail_ = size();
    head_ = 0;
    buf_.swap(bigger);
  }

  std::vector<T> buf_;
  size_t head_ = 0, tail_ = 0;
};

}  // namespace mrc::engine
