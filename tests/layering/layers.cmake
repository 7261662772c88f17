# The layers of libmrc/src, lowest first, as rank_<folder> (included by check_layers.cmake and
# compile_layers.cmake, the one place they are listed). A layer may include itself and the
# layers of a lower rank; layers of one rank (verbs, observe) may not include each other.
set(rank_common 0)
set(rank_wire 1)
set(rank_engine 2)
set(rank_io 3)  # io/sim, io/udp, io/config
set(rank_verbs 4)
set(rank_observe 4)
set(rank_api 5)
set(layer_order "common, wire, engine, io, verbs|observe, api")
