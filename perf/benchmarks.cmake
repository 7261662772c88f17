# Benchmarks (mrc_add_benchmark is defined in perf/CMakeLists.txt).
mrc_add_benchmark(engine_pps_bench SOURCES engine_pps_bench.cc)
mrc_add_benchmark(engine_qps_bench SOURCES engine_qps_bench.cc)
