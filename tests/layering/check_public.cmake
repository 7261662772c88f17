# Checks libmrc's public boundary: libmrc/include/mrc/ (PUBLIC) is the C++ API, spelled
# "mrc/<layer>/<file>.h"; every header of libmrc/src (SRC) is private, for the layer's own
# sources and its tests (mrc_internal_headers). Run as a script:
#   cmake -DSRC=<libmrc/src> -DPUBLIC=<libmrc/include/mrc> "-DCONSUMERS=<dir>;<dir>..."
#         -P check_public.cmake
# Fails naming every offending file and include when a public header includes a private one
# (it would leak it to every user of the API), when a file under CONSUMERS (the tools, the
# NCCL plugin, the verbs shim, the benchmarks) includes one, or when one header path is in
# both trees (a private header re-added beside its public one). (public_headers.cmake proves
# the public headers compile with only the public include folders.)
cmake_minimum_required(VERSION 3.20)
foreach(v SRC PUBLIC)
  if(NOT DEFINED ${v} OR NOT IS_DIRECTORY "${${v}}")
    message(FATAL_ERROR "check_public: ${v}='${${v}}' is not a folder (see the file comment)")
  endif()
  get_filename_component(${v} "${${v}}" ABSOLUTE)
endforeach()

# The private headers, relative to SRC, as libmrc's sources spell them ("engine/internal.h").
file(GLOB_RECURSE private RELATIVE "${SRC}" "${SRC}/*.h")
file(GLOB_RECURSE public RELATIVE "${PUBLIC}" "${PUBLIC}/*.h")
list(SORT private)
list(SORT public)

set(errors "")
foreach(h IN LISTS public)
  if(h IN_LIST private)
    string(APPEND errors "  ${h}: both public (mrc/${h}) and private (${SRC}/${h})\n")
  endif()
endforeach()

# Appends to `errors` each include of a private header in `file` (shown as `shown`).
function(check_file file shown)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    if(inc IN_LIST private)
      string(APPEND errors "  ${shown} includes \"${inc}\", a private header of libmrc\n")
    endif()
  endforeach()
  set(errors "${errors}" PARENT_SCOPE)
endfunction()

foreach(h IN LISTS public)
  check_file("${PUBLIC}/${h}" "public header mrc/${h}")
endforeach()

foreach(dir IN LISTS CONSUMERS)
  if(NOT IS_DIRECTORY "${dir}")
    string(APPEND errors "  ${dir}: a consumer folder that does not exist\n")
    continue()
  endif()
  file(GLOB_RECURSE files "${dir}/*.h" "${dir}/*.cc" "${dir}/*.c")
  list(SORT files)
  foreach(f IN LISTS files)
    check_file("${f}" "${f}")
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "check_public: libmrc's private headers reached from outside:\n${errors}")
endif()
list(LENGTH public n)
message(STATUS "check_public: ${n} public headers under ${PUBLIC}; none includes a private one")
