# Checks that each layer of libmrc includes only itself and the layers below it (no upward
# include, hence no include cycle between layers). Run as a script:
#   cmake -DSRC=<libmrc/src> [-DPUBLIC=<libmrc/include/mrc>] -P check_layers.cmake
# Layers (layers.cmake), lowest first; a layer is a top folder of SRC (private headers and
# sources) or of PUBLIC (public headers, spelled "mrc/<layer>/..."), and layers of one rank
# (verbs, observe) may not include each other. An include whose first path component, after
# "mrc/", is no layer (<system>, "srv6/...", "mrc/mrc.h", a file next to the includer) is not
# checked.
# Fails naming every offending file and include; a folder of SRC that is no layer is an
# error too, so that a new layer gets its place here.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED SRC OR NOT IS_DIRECTORY "${SRC}")
  message(FATAL_ERROR "check_layers: SRC='${SRC}' is not a folder (pass -DSRC=<libmrc/src>)")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)
set(roots "${SRC}")
if(DEFINED PUBLIC)
  if(NOT IS_DIRECTORY "${PUBLIC}")
    message(FATAL_ERROR "check_layers: PUBLIC='${PUBLIC}' is not a folder")
  endif()
  get_filename_component(PUBLIC "${PUBLIC}" ABSOLUTE)
  list(APPEND roots "${PUBLIC}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

# Known exceptions, as "<file relative to SRC> -> <include>", each with the reason: none today.
set(known_exceptions)

set(errors "")
libmrc_layers("${roots}" layers)
foreach(layer IN LISTS layers)
  set(files "")
  foreach(root IN LISTS roots)
    file(GLOB_RECURSE found RELATIVE "${root}" "${root}/${layer}/*.h" "${root}/${layer}/*.cc")
    list(TRANSFORM found PREPEND "${root}/")
    list(APPEND files ${found})
  endforeach()
  list(SORT files)
  foreach(path IN LISTS files)
    file(RELATIVE_PATH f "${SRC}" "${path}")
    if(DEFINED PUBLIC AND path MATCHES "^${PUBLIC}/")
      file(RELATIVE_PATH f "${PUBLIC}" "${path}")
      set(f "mrc/${f}")
    endif()
    file(STRINGS "${path}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
      string(REGEX REPLACE "^mrc/" "" bare "${inc}")
      string(REGEX MATCH "^[^/]+" top "${bare}")
      if(NOT bare MATCHES "/" OR NOT DEFINED rank_${top} OR top STREQUAL layer)
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
list(JOIN roots " and " shown)
message(STATUS "check_layers: every layer of ${shown} includes only layers below it")
