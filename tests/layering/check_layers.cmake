# Checks that each layer of libmrc/src includes only itself and the layers below it (no
# upward include, hence no include cycle between layers). Run as a script:
#   cmake -DSRC=<libmrc/src> -P check_layers.cmake
# Layers (layers.cmake), lowest first; a layer is a top folder of SRC, and layers of one rank (verbs,
# observe) may not include each other. An include whose first path component is no layer
# (<system>, "srv6/...", "mrc/..." of include/, a file next to the includer) is not checked.
# Fails naming every offending file and include; a folder of SRC that is no layer is an
# error too, so that a new layer gets its place here.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED SRC OR NOT IS_DIRECTORY "${SRC}")
  message(FATAL_ERROR "check_layers: SRC='${SRC}' is not a folder (pass -DSRC=<libmrc/src>)")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)

include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

# Known exceptions, as "<file relative to SRC> -> <include>", each with the reason: none today.
set(known_exceptions)

set(errors "")
libmrc_layers("${SRC}" layers)
foreach(layer IN LISTS layers)
  file(GLOB_RECURSE files RELATIVE "${SRC}" "${SRC}/${layer}/*.h" "${SRC}/${layer}/*.cc")
  list(SORT files)
  foreach(f IN LISTS files)
    file(STRINGS "${SRC}/${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
      string(REGEX MATCH "^[^/]+" top "${inc}")
      if(NOT inc MATCHES "/" OR NOT DEFINED rank_${top} OR top STREQUAL layer)
        continue()
      endif()
      if(rank_${top} LESS rank_${layer})
        continue()
      endif()
      if("${f} -> ${inc}" IN_LIST known_exceptions)
        continue()
      endif()
      string(APPEND errors "  ${f} includes \"${inc}\": ${top}/ is not below ${layer}/\n")
    endforeach()
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "check_layers: upward includes in ${SRC} (layers, lowest first: "
                      "${layer_order}):\n${errors}")
endif()
message(STATUS "check_layers: every layer of ${SRC} includes only layers below it")
