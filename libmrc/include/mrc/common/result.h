// Result<T, E>: a value or a typed error, for the engine and datapath (no exceptions there).
// Threading: a plain value type.
//
// libstdc++ 12 has std::expected only under C++23 and Debian ships no
// tl::expected, so this is the smallest subset the project uses. Converted to
// errno / ncclResult_t exactly once at each C boundary.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

namespace mrc {

template <typename E>
struct Err {
  // A constructor, not an aggregate: Err(x) then works without C++20's parenthesized
  // aggregate init, which clang before 16 (the fuzz preset's compiler) lacks.
  explicit Err(E e) : error(std::move(e)) {}
  E error;
};
template <typename E>
Err(E) -> Err<E>;

template <typename T, typename E>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Err<E> err) : v_(std::in_place_index<1>, err.error) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  E error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, E> v_;
};

/// Result of an operation that returns nothing but may fail.
template <typename E>
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Err<E> err) : failed_(true), error_(err.error) {}  // NOLINT: implicit by design
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  E error() const {
    assert(failed_);
    return error_;
  }

 private:
  bool failed_ = false;
  E error_{};
};

}  // namespace mrc
