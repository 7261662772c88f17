// Reading enum fields that C programs fill in (ibv_qp_attr::qp_state, path_mtu,
// ibv_send_wr::opcode, ...). Threading: pure functions.
#pragma once

#include <cstring>

namespace mrc {

/// An enum field as the app stored it. A C app may put any int there, which a load of the C++
/// enum type does not allow (undefined outside the enum's range): read it as an int.
template <class E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace mrc
