# Baselines of mrc-perf on two namespaces of our own (needs root; skips otherwise).
mrc_add_test(baseline_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/baseline_test.cc LIBS mrc_baseline)
