/* A two-rank MPI program whose every byte is checked: a ping-pong (rank 0 sends a patterned
 * buffer, rank 1 checks it and sends back its own pattern, for sizes 1 B .. 4 MiB, several
 * rounds each) and MPI_Allreduce (sum) of int and double vectors whose result each rank
 * checks against the closed form. tests/mpi/ns_mpi_test.cc runs it under mpirun across two
 * hosts of the namespace fabric over MRC (Open MPI's UCX PML, UCX's rc_verbs on mrc0).
 * Prints one line per check and "mpi_check: OK <bytes moved>" on rank 0; exits 1 naming the
 * first wrong byte otherwise. Usage: mpi_check [max_bytes] [rounds] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int from, int round, size_t i) {
  return (unsigned char)(i * 131u + (unsigned)from * 17u + (unsigned)round * 7u + 1u);
}

static int check(const unsigned char* b, size_t n, int from, int round, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != pattern(from, round, i)) {
      fprintf(stderr, "mpi_check: %s of %zu bytes, round %d: byte %zu is %u, not %u\n", what, n,
              round, i, b[i], pattern(from, round, i));
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_check: needs 2 ranks, has %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (4u << 20);
  const int rounds = argc > 2 ? atoi(argv[2]) : 5;
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("mpi_check: rank %d of %d on %s\n", rank, size, host);
  unsigned char* buf = malloc(max);
  int bad = 0;
  unsigned long long moved = 0;
  const int peer = 1 - rank;
  for (size_t n = 1; n <= max && !bad; n *= 4) {
    for (int r = 0; r < rounds && !bad; ++r) {
      if (rank == 0) {
        for (size_t i = 0; i < n; ++i) buf[i] = pattern(0, r, i);
        MPI_Send(buf, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD);
        memset(buf, 0, n);
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = check(buf, n, 1, r, "pong");
      } else {
        memset(buf, 0, n);
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = check(buf, n, 0, r, "ping");
        for (size_t i = 0; i < n; ++i) buf[i] = pattern(1, r, i);
        MPI_Send(buf, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD);
      }
      moved += 2 * n;
    }
    /* Both ranks agree before the next size (a wrong byte on either side stops both). */
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad = any;
    if (!bad && rank == 0) printf("mpi_check: ping-pong %zu bytes x %d rounds: ok\n", n, rounds);
  }
  free(buf);

  /* Allreduce: element i of rank k is i + 1000 k (ints) and (i + 0.5) * (k + 1) (doubles). */
  const int counts[] = {1, 1000, 1 << 18};
  for (unsigned c = 0; c < sizeof counts / sizeof counts[0] && !bad; ++c) {
    const int n = counts[c];
    int* in = malloc(sizeof(int) * n);
    int* out = malloc(sizeof(int) * n);
    double* din = malloc(sizeof(double) * n);
    double* dout = malloc(sizeof(double) * n);
    for (int i = 0; i < n; ++i) {
      in[i] = i + 1000 * rank;
      din[i] = (i + 0.5) * (rank + 1);
    }
    MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(din, dout, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n && !bad; ++i) {
      if (out[i] != 2 * i + 1000 || dout[i] != (i + 0.5) * 3) {
        fprintf(stderr, "mpi_check: allreduce of %d: element %d is %d / %g, not %d / %g\n", n, i,
                out[i], dout[i], 2 * i + 1000, (i + 0.5) * 3);
        bad = 1;
      }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad = any;
    if (!bad && rank == 0) printf("mpi_check: allreduce of %d ints and %d doubles: ok\n", n, n);
    moved += (unsigned long long)n * (sizeof(int) + sizeof(double));
    free(in);
    free(out);
    free(din);
    free(dout);
  }
  if (!bad && rank == 0) printf("mpi_check: OK %llu bytes\n", moved);
  fflush(stdout);
  MPI_Finalize();
  return bad;
}
