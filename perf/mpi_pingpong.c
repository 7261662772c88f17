/* An osu_latency-style MPI ping-pong between two ranks (perf/mpi_perf.sh runs it across two
 * hosts of the namespace fabric, over MRC and over Open MPI's TCP BTL in one run). For each
 * message size (1 B, then x4 up to max_bytes): `warmup` round trips not timed, then `iters`
 * timed round trips of MPI_Send / MPI_Recv; rank 0 prints the half round trip in
 * microseconds and the bandwidth one message per half round trip gives (MB/s = 10^6 B/s).
 * The first warm-up message each way is patterned and checked byte by byte (a wrong byte
 * aborts, naming it), so a transport that moves nothing cannot report a time.
 *
 * Output (rank 0, one line per size): "mpi_pingpong <bytes> <half_rtt_us> <MB/s>"; then
 * "mpi_pingpong total <bytes moved> <seconds timed>" for the bytes / time check.
 * Usage: mpi_pingpong [max_bytes=1048576] [iters=1000] [warmup=20]
 * (sizes over 64 KiB run iters / 10 round trips, at least 20). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int from, size_t i) {
  return (unsigned char)(i * 131u + (unsigned)from * 17u + 1u);
}

static void fill(unsigned char* b, size_t n, int from) {
  for (size_t i = 0; i < n; ++i) b[i] = pattern(from, i);
}

static void check(const unsigned char* b, size_t n, int from) {
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != pattern(from, i)) {
      fprintf(stderr, "mpi_pingpong: message of %zu bytes from rank %d: byte %zu is %u, not %u\n",
              n, from, i, b[i], pattern(from, i));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks, has %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20);
  const int iters = argc > 2 ? atoi(argv[2]) : 1000;
  const int warmup = argc > 3 ? atoi(argv[3]) : 20;
  if (max == 0 || max > (1u << 30) || iters < 1 || warmup < 1) {
    if (rank == 0)
      fprintf(stderr,
              "mpi_pingpong: bad arguments (max_bytes 1..1 GiB, iters >= 1, warmup >= 1)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  unsigned char* buf = malloc(max);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 3);
  const int peer = 1 - rank;
  double total_s = 0, total_bytes = 0;
  for (size_t n = 1; n <= max; n *= 4) {
    const int timed = n > 65536 ? (iters / 10 > 20 ? iters / 10 : 20) : iters;
    double t0 = 0;
    for (int i = 0; i < warmup + timed; ++i) {
      if (i == warmup) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
      }
      if (rank == 0) {
        if (i == 0) fill(buf, n, 0);
        MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i == 0) check(buf, n, 1);
      } else {
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i == 0) {
          check(buf, n, 0);
          fill(buf, n, 1);
        }
        MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      }
    }
    const double s = MPI_Wtime() - t0;
    if (rank == 0) {
      const double half_us = s * 1e6 / (2.0 * timed);
      printf("mpi_pingpong %zu %.2f %.1f\n", n, half_us, (double)n / half_us);
      fflush(stdout);
    }
    total_s += s;
    total_bytes += 2.0 * (double)n * timed;
  }
  if (rank == 0) printf("mpi_pingpong total %.0f %.6f\n", total_bytes, total_s);
  free(buf);
  MPI_Finalize();
  return 0;
}
