#!/bin/sh
# mpirun's rsh agent for the namespace fabric (--mca plm_rsh_agent): "mpi_agent.sh <host> <command>"
# runs the command (an orted) in the namespace of the fabric host whose management address
# <host> is: 10.255.0.<k+1> is host k, namespace $MRC_MPI_PREFIX-h<k>.
host=$1
shift
k=$((${host##*.} - 1))
exec ip netns exec "$MRC_MPI_PREFIX-h$k" sh -c "$*"
