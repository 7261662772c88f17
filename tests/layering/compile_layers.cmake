# Checks that each layer of libmrc/src compiles against only the layers below it: for each
# layer, one translation unit that includes every header of the layer is compiled
# (-fsyntax-only) with an include path that holds that layer and the layers of a lower rank
# (layers.cmake) and nothing else of SRC, so an upward or sideways include, however it is
# spelled, is a missing file. (check_layers.cmake reads the include lines of every file; this
# proves the headers stand on what is below them.) Run as a script:
#   cmake -DSRC=<libmrc/src> -DCXX=<c++ compiler> -DWORK=<scratch folder>
#         "-DINCLUDES=<dir>;<dir>..." -P compile_layers.cmake
# INCLUDES: the include folders outside SRC the headers may use (libmrc/include, srv6/include).
# Fails naming each layer that does not compile, with the compiler's first lines.
cmake_minimum_required(VERSION 3.20)
foreach(v SRC CXX WORK)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "compile_layers: pass -D${v}=... (see the file comment)")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${SRC}")
  message(FATAL_ERROR "compile_layers: SRC='${SRC}' is not a folder")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

file(REMOVE_RECURSE "${WORK}")
set(errors "")
set(checked "")
libmrc_layers("${SRC}" layers)
foreach(layer IN LISTS layers)
  # WORK/<layer>/inc: links to this layer and the layers below it.
  set(inc "${WORK}/${layer}/inc")
  file(MAKE_DIRECTORY "${inc}")
  foreach(other IN LISTS layers)
    if(other STREQUAL layer OR rank_${other} LESS rank_${layer})
      file(CREATE_LINK "${SRC}/${other}" "${inc}/${other}" SYMBOLIC)
    endif()
  endforeach()
  file(GLOB_RECURSE headers RELATIVE "${SRC}" "${SRC}/${layer}/*.h")
  list(SORT headers)
  if(NOT headers)
    continue()
  endif()
  set(tu "// Every header of ${layer}/, on only the layers below it.\n")
  foreach(h IN LISTS headers)
    string(APPEND tu "#include \"${h}\"\n")
  endforeach()
  file(WRITE "${WORK}/${layer}/all.cc" "${tu}")
  set(flags -std=c++20 -fsyntax-only -I${inc})
  foreach(d IN LISTS INCLUDES)
    list(APPEND flags -I${d})
  endforeach()
  execute_process(COMMAND ${CXX} ${flags} "${WORK}/${layer}/all.cc" RESULT_VARIABLE rc
                  ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REGEX MATCHALL "[^\n]*error[^\n]*" first "${err}")
    list(SUBLIST first 0 3 first)
    list(JOIN first "\n      " first)
    string(APPEND errors "  ${layer}/ does not compile on the layers below it:\n      ${first}\n")
  endif()
  list(APPEND checked ${layer})
endforeach()
file(REMOVE_RECURSE "${WORK}")

if(errors)
  message(FATAL_ERROR "compile_layers: in ${SRC} (layers, lowest first: ${layer_order}):\n${errors}")
endif()
list(JOIN checked ", " checked)
message(STATUS "compile_layers: ${checked}: each compiles on only the layers below it")
