# mrc_trim: the fabric's tc eBPF programs: trimming / ECN marking (trim.bpf.c, loader trim.cc)
# and gray failures (gray.bpf.c, loader and delay line gray.cc).
# Included from tools/mrc-fabric/CMakeLists.txt. The BPF object is compiled with clang and
# embedded in the library as a libbpf skeleton (bpftool gen skeleton): no file lookup at runtime.
find_program(MRC_CLANG clang REQUIRED)
find_program(MRC_BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf)
find_package(Threads REQUIRED)

cmake_path(GET CMAKE_CURRENT_LIST_DIR PARENT_PATH _trim_fabric_dir)
set(_trim_out ${CMAKE_CURRENT_BINARY_DIR}/bpf)
set(_bpf_dir ${CMAKE_CURRENT_LIST_DIR})
# bpf/<name>.bpf.c -> ${_trim_out}/<name>.skel.h (skeleton name <name>_bpf).
function(mrc_bpf_skeleton name)
  set(src ${_bpf_dir}/${name}.bpf.c)
  add_custom_command(
    OUTPUT ${_trim_out}/${name}.bpf.o
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_trim_out}
    COMMAND ${MRC_CLANG} -target bpf -O2 -g -Wall -Werror
            -I/usr/include/${CMAKE_LIBRARY_ARCHITECTURE} -I${_bpf_dir}
            -c ${src} -o ${_trim_out}/${name}.bpf.o
    DEPENDS ${src} ${_bpf_dir}/${name}_shared.h
    COMMENT "clang -target bpf ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${_trim_out}/${name}.skel.h
    COMMAND ${MRC_BPFTOOL} gen skeleton ${_trim_out}/${name}.bpf.o name ${name}_bpf > ${_trim_out}/${name}.skel.h
    DEPENDS ${_trim_out}/${name}.bpf.o
    COMMENT "bpftool gen skeleton ${name}.bpf.o"
    VERBATIM)
endfunction()
mrc_bpf_skeleton(trim)
mrc_bpf_skeleton(gray)

# gray.cc: the gray-failure program (gray.bpf.c) and the delay line; tc_bpf.cc: what both
# loaders share.
add_library(mrc_trim STATIC ${_trim_fabric_dir}/trim.cc ${_trim_fabric_dir}/gray.cc
                            ${_trim_fabric_dir}/tc_bpf.cc ${_trim_out}/trim.skel.h
                            ${_trim_out}/gray.skel.h)
target_include_directories(mrc_trim PUBLIC ${_trim_fabric_dir}
                           PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${_trim_out})
target_link_libraries(mrc_trim PUBLIC mrc_common mrc_srv6 PRIVATE PkgConfig::LIBBPF Threads::Threads)
