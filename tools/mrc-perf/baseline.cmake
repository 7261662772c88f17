# mrc_baseline: the reference transports of mrc-perf (iperf3 TCP, MPTCP, a UDP GSO ceiling).
# Included from tools/mrc-perf/CMakeLists.txt; #include "baseline.h".
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)

add_library(mrc_baseline STATIC
  ${CMAKE_CURRENT_LIST_DIR}/baseline.cc
  ${CMAKE_CURRENT_LIST_DIR}/udp_blast.cc
)
target_include_directories(mrc_baseline PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(mrc_baseline PUBLIC mrc_core mrc_udp Threads::Threads
                      PRIVATE nlohmann_json::nlohmann_json)
