# mrc_trim: the trimming / ECN-marking tc eBPF program (trim.bpf.c) and its loader (trim.cc).
# Included from tools/mrc-fabric/CMakeLists.txt. The BPF object is compiled with clang and
# embedded in the library as a libbpf skeleton (bpftool gen skeleton): no file lookup at runtime.
find_program(MRC_CLANG clang REQUIRED)
find_program(MRC_BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf)
find_package(Threads REQUIRED)

cmake_path(GET CMAKE_CURRENT_LIST_DIR PARENT_PATH _trim_fabric_dir)
set(_trim_src ${CMAKE_CURRENT_LIST_DIR}/trim.bpf.c)
set(_trim_out ${CMAKE_CURRENT_BINARY_DIR}/bpf)
add_custom_command(
  OUTPUT ${_trim_out}/trim.bpf.o
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_trim_out}
  COMMAND ${MRC_CLANG} -target bpf -O2 -g -Wall -Werror
          -I/usr/include/${CMAKE_LIBRARY_ARCHITECTURE} -I${CMAKE_CURRENT_LIST_DIR}
          -c ${_trim_src} -o ${_trim_out}/trim.bpf.o
  DEPENDS ${_trim_src} ${CMAKE_CURRENT_LIST_DIR}/trim_shared.h
  COMMENT "clang -target bpf trim.bpf.c"
  VERBATIM)
add_custom_command(
  OUTPUT ${_trim_out}/trim.skel.h
  COMMAND ${MRC_BPFTOOL} gen skeleton ${_trim_out}/trim.bpf.o name trim_bpf > ${_trim_out}/trim.skel.h
  DEPENDS ${_trim_out}/trim.bpf.o
  COMMENT "bpftool gen skeleton trim.bpf.o"
  VERBATIM)

add_library(mrc_trim STATIC ${_trim_fabric_dir}/trim.cc ${_trim_out}/trim.skel.h)
target_include_directories(mrc_trim PUBLIC ${_trim_fabric_dir}
                           PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${_trim_out})
target_link_libraries(mrc_trim PUBLIC mrc_core mrc_udp PRIVATE PkgConfig::LIBBPF Threads::Threads)
