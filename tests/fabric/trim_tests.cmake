# trim_test: the trimming / ECN-marking eBPF program on real namespaces (skips without root).
# Included from tests/fabric/CMakeLists.txt.
# mrc_udp: the IPv4 case drives a receiving UdpDriver that NACKs what was trimmed.
mrc_add_test(trim_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/trim_test.cc LIBS mrc_trim mrc_udp)
