# trim_test: the trimming / ECN-marking eBPF program on real namespaces (skips without root).
# Included from tests/fabric/CMakeLists.txt.
mrc_add_test(trim_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/trim_test.cc LIBS mrc_trim)
