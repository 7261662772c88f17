#!/bin/sh
# Runs one MPI rank as the fabric host whose namespace it is in: that host's MRC config and the
# verbs shim ($MRC_MPI_SHIM) preloaded. Says which host on stderr.
ns=$(ip netns identify $$)
h=${ns##*-}
echo "mpi_rank.sh: rank in $ns" >&2
exec env MRC_CONFIG="/run/mrc-fabric/$MRC_MPI_PREFIX/hosts/$h.json" MRC_STATS=0 \
  LD_PRELOAD="$MRC_MPI_SHIM" "$@"
