/* MPI_Allreduce (float32, sum) timed in the shape of nccl-tests'
 * all_reduce_perf, so that its table lines up with `microddp bench allreduce`.
 *
 * Per size S (from -b to -e, multiplied by -f each step):
 *   one checked all-reduce of integer-valued data whose exact sum is known
 *   (#wrong counts every element that differs), then --warmup untimed and
 *   --iters timed all-reduces back to back between two barriers. The time is
 *   the slowest rank's mean per all-reduce;
 *     algbw = S / t,   busbw = algbw * 2(n-1)/n.
 * The reduction is in place (MPI_IN_PLACE), like microddp's all_reduce(buf);
 * --oop uses a separate receive buffer instead (nccl-tests' default).
 *
 * Build and run (bench/allreduce_vs_mpi_gloo.sh does this into a temp dir):
 *   mpicc -O2 -o mpi_allreduce bench/mpi_allreduce.c
 *   mpirun -np 2 --mca pml ob1 --mca btl vader,self ./mpi_allreduce -b 4K -e 64M -f 4
 *   mpirun -np 2 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo ./mpi_allreduce
 * Options: -b SIZE -e SIZE -f FACTOR --iters N --warmup N --oop --json FILE
 * (--json: one JSON object per size, one per line, written by rank 0).
 */
#include <ctype.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "4096", "4K", "64M", "1G" (powers of 1024; a trailing B or iB is allowed). */
static size_t parse_size(const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  size_t scale = 1;
  switch (toupper((unsigned char)*end)) {
    case '\0':
      scale = 1;
      break;
    case 'B':
      scale = 1;
      break;
    case 'K':
      scale = (size_t)1 << 10;
      break;
    case 'M':
      scale = (size_t)1 << 20;
      break;
    case 'G':
      scale = (size_t)1 << 30;
      break;
    default:
      return 0;
  }
  return (size_t)v * scale;
}

/* Rank r's element i is ((r + i) mod 5) - 2, the same pattern as microddp's
 * benchmark: small integers, so every partial sum is exact in fp32. */
static float value(int rank, long long i) {
  return (float)((rank + i) % 5) - 2.0f;
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-b SIZE] [-e SIZE] [-f FACTOR] [--iters N] [--warmup N] [--oop] "
          "[--json FILE]\n",
          argv0);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  size_t lo = 4096, hi = (size_t)64 << 20;
  double factor = 4;
  int iters = 20, warmup = 5, oop = 0;
  const char* json = NULL;
  for (int a = 1; a < argc; ++a) {
    const char* o = argv[a];
    const char* v = a + 1 < argc ? argv[a + 1] : NULL;
    if (!strcmp(o, "--oop")) {
      oop = 1;
      continue;
    }
    if (!v) {
      if (rank == 0) usage(argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!strcmp(o, "-b") || !strcmp(o, "--minbytes"))
      lo = parse_size(v);
    else if (!strcmp(o, "-e") || !strcmp(o, "--maxbytes"))
      hi = parse_size(v);
    else if (!strcmp(o, "-f") || !strcmp(o, "--stepfactor"))
      factor = atof(v);
    else if (!strcmp(o, "--iters"))
      iters = atoi(v);
    else if (!strcmp(o, "--warmup"))
      warmup = atoi(v);
    else if (!strcmp(o, "--json"))
      json = v;
    else {
      if (rank == 0) usage(argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ++a;
  }
  if (lo == 0 || lo > hi || !(factor > 1.0) || iters < 1 || warmup < 0) {
    if (rank == 0) usage(argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  const size_t max_count = hi / sizeof(float) + 1;
  float* buf = (float*)aligned_alloc(64, (max_count * sizeof(float) + 63) / 64 * 64);
  float* out = oop ? (float*)aligned_alloc(64, (max_count * sizeof(float) + 63) / 64 * 64) : NULL;
  if (!buf || (oop && !out)) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(buf, 0, max_count * sizeof(float));
  if (out) memset(out, 0, max_count * sizeof(float));

  FILE* jf = NULL;
  if (rank == 0 && json) {
    jf = fopen(json, "w");
    if (!jf) {
      fprintf(stderr, "cannot write %s\n", json);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (rank == 0) {
    int len = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(lib, &len);
    char* nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    char* comma = strchr(lib, ',');
    if (comma) *comma = '\0';
    printf("# MPI_Allreduce: %d ranks, float32 sum, %s; %s\n", n, oop ? "out of place" : "in place",
           lib);
    printf("# iters %d, warmup %d; time = slowest rank's mean; busbw = algbw * 2(n-1)/n\n#\n",
           iters, warmup);
    printf("# %12s %12s %6s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    fflush(stdout);
  }

  long long total_wrong = 0;
  double sum_busbw = 0;
  int rows = 0;
  for (double s = (double)lo; s <= (double)hi * (1 + 1e-9); s *= factor) {
    const long long count = (long long)((size_t)s / sizeof(float));
    const size_t bytes = (size_t)count * sizeof(float);
    float* dst = oop ? out : buf;
    const void* src = oop ? (const void*)buf : MPI_IN_PLACE;

    /* Checked run. */
    for (long long i = 0; i < count; ++i) buf[i] = value(rank, i);
    MPI_Allreduce(src, dst, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    float want[5];
    for (int k = 0; k < 5; ++k) {
      want[k] = 0;
      for (int r = 0; r < n; ++r) want[k] += value(r, k);
    }
    long long wrong = 0;
    for (long long i = 0; i < count; ++i) wrong += dst[i] != want[i % 5];

    /* Timed runs on zeros (sums stay zero, the same arithmetic cost). */
    memset(buf, 0, bytes);
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(src, dst, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(src, dst, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t_us = (MPI_Wtime() - t0) * 1e6 / iters;
    double t_max = 0;
    long long wrong_all = 0;
    MPI_Reduce(&t_us, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
      const double algbw = t_max > 0 ? (double)bytes / (t_max * 1e3) : 0; /* GB/s */
      const double busbw = algbw * 2.0 * (n - 1) / n;
      printf("  %12zu %12lld %6s %6s %12.2f %12.3f %12.3f %8lld\n", bytes, count, "fp32", "sum",
             t_max, algbw, busbw, wrong_all);
      fflush(stdout);
      if (jf) {
        fprintf(jf,
                "{\"impl\": \"mpi\", \"nproc\": %d, \"bytes\": %zu, \"count\": %lld, "
                "\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %lld}\n",
                n, bytes, count, t_max, algbw, busbw, wrong_all);
        fflush(jf);
      }
      total_wrong += wrong_all;
      sum_busbw += busbw;
      ++rows;
    }
  }
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? sum_busbw / rows : 0.0);
    if (jf) fclose(jf);
  }
  free(buf);
  free(out);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
