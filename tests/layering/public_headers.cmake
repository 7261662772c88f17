# Checks that libmrc's public headers stand alone: one translation unit that includes every
# header under PUBLIC (libmrc/include/mrc, spelled "mrc/...") is compiled (-fsyntax-only) with
# only INCLUDES on the include path (libmrc/include and srv6/include: what a user of the C++ API
# gets), so a public header that includes a private one (libmrc/src), however it is spelled,
# is a missing file. Run as a script:
#   cmake -DPUBLIC=<libmrc/include/mrc> -DCXX=<c++ compiler> -DWORK=<scratch folder>
#         "-DINCLUDES=<dir>;<dir>..." -P public_headers.cmake
# Fails with the compiler's first lines (which name the public header and its include).
cmake_minimum_required(VERSION 3.20)
foreach(v PUBLIC CXX WORK INCLUDES)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "public_headers: pass -D${v}=... (see the file comment)")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${PUBLIC}")
  message(FATAL_ERROR "public_headers: PUBLIC='${PUBLIC}' is not a folder")
endif()
get_filename_component(PUBLIC "${PUBLIC}" ABSOLUTE)

file(GLOB_RECURSE headers RELATIVE "${PUBLIC}" "${PUBLIC}/*.h")
list(SORT headers)
if(NOT headers)
  message(FATAL_ERROR "public_headers: no header under ${PUBLIC}")
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(tu "// Every public header of libmrc, on only the public include folders.\n")
foreach(h IN LISTS headers)
  string(APPEND tu "#include \"mrc/${h}\"\n")
endforeach()
file(WRITE "${WORK}/public.cc" "${tu}")
set(flags -std=c++20 -fsyntax-only)
foreach(d IN LISTS INCLUDES)
  list(APPEND flags -I${d})
endforeach()
execute_process(COMMAND ${CXX} ${flags} "${WORK}/public.cc" RESULT_VARIABLE rc
                ERROR_VARIABLE err OUTPUT_VARIABLE out)
file(REMOVE_RECURSE "${WORK}")
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "[^\n]*(included from|error)[^\n]*" first "${err}")
  list(SUBLIST first 0 6 first)
  list(JOIN first "\n    " first)
  message(FATAL_ERROR "public_headers: the public headers under ${PUBLIC} do not compile on "
                      "only ${INCLUDES}:\n    ${first}\n")
endif()
list(LENGTH headers n)
message(STATUS "public_headers: ${n} headers of ${PUBLIC} compile on only ${INCLUDES}")
