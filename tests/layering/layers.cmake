# The layers of libmrc (the folders of libmrc/src and of libmrc/include/mrc), lowest first, as
# rank_<folder> (included by check_layers.cmake and compile_layers.cmake, the one place they are
# listed). A layer may include itself and the
# layers of a lower rank; layers of one rank (verbs, observe) may not include each other.
set(rank_common 0)
set(rank_wire 1)
set(rank_engine 2)
set(rank_io 3)  # io/sim, io/udp, io/config
set(rank_verbs 4)
set(rank_testing 4)  # the simulator's test harness (testbed, bulk, goodput)
set(rank_observe 4)
set(rank_api 5)
set(layer_order "common, wire, engine, io, verbs|observe|testing, api")

# Sets `out` to the layers found in the folders `roots` (their top folders, sorted, each once:
# libmrc/src for the private headers and sources, libmrc/include/mrc for the public headers)
# and appends to `errors` one line for each folder that is no layer, so that a new layer gets
# its place here.
function(libmrc_layers roots out)
  set(found "")
  foreach(src IN LISTS roots)
    file(GLOB all RELATIVE "${src}" "${src}/*")
    foreach(d IN LISTS all)
      if(NOT IS_DIRECTORY "${src}/${d}")
        continue()
      endif()
      if(DEFINED rank_${d})
        list(APPEND found ${d})
      else()
        string(APPEND errors "  ${d}/: a folder of ${src} that is no layer (add it to layers.cmake)\n")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES found)
  list(SORT found)
  set(${out} "${found}" PARENT_SCOPE)
  set(errors "${errors}" PARENT_SCOPE)
endfunction()
