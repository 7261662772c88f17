# Checks libmrc's public boundary: what code outside libmrc (the tools, the NCCL plugin, the
# verbs shim, the benchmarks) may include from libmrc/src. Run as a script:
#   cmake -DSRC=<libmrc/src> "-DCONSUMERS=<dir>;<dir>..." -P check_public.cmake
# Internal headers (below: a layer's own state and helpers) are for the layer's sources and
# its tests only. Every other header of SRC is public API, so no public header may include an
# internal one (it would leak it), and no file under CONSUMERS may include one. Fails naming
# every offending file and include. A header listed here that SRC does not have is an error,
# so the list follows renames.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED SRC OR NOT IS_DIRECTORY "${SRC}")
  message(FATAL_ERROR "check_public: SRC='${SRC}' is not a folder (pass -DSRC=<libmrc/src>)")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)

# The internal headers, relative to SRC.
set(internal
  engine/internal.h  # Core and Qp: the engine's state (engine.h is the API)
  engine/sack.h      # the receiver's scoreboard, inside Qp
  engine/timers.h    # the QP's timer array, inside Qp
  verbs/internal.h   # the verbs device's helpers (peer lookup, logging)
  verbs/objects.h    # the objects behind ibv_* handles (verbs.h is the API)
  api/ocp.h          # the objects behind mrc_* handles (include/mrc/ is the API)
)

set(errors "")
foreach(h IN LISTS internal)
  if(NOT EXISTS "${SRC}/${h}")
    string(APPEND errors "  ${h}: listed as internal, but ${SRC} has no such header\n")
  endif()
endforeach()

# Appends to `errors` each include of an internal header in `file` (shown as `shown`).
function(check_file file shown)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    if(inc IN_LIST internal)
      string(APPEND errors "  ${shown} includes \"${inc}\", an internal header of libmrc\n")
    endif()
  endforeach()
  set(errors "${errors}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE headers RELATIVE "${SRC}" "${SRC}/*.h")
list(SORT headers)
foreach(h IN LISTS headers)
  if(NOT h IN_LIST internal)
    check_file("${SRC}/${h}" "public header ${h}")
  endif()
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
  message(FATAL_ERROR "check_public: libmrc's internal headers reached from outside:\n${errors}")
endif()
