/* Single-core memory bandwidth, STREAM-like: copy (c = a) and triad
 * (a = b + s*c) over three arrays of --mb MB each (default 256 MB, far
 * beyond any cache). Counted as STREAM counts: copy moves 2 arrays' bytes,
 * triad 3 (write-allocate traffic not counted). Prints the median and best
 * over --reps repetitions, and with --json one JSON line.
 *
 * An all-reduce on one host cannot beat this: each byte of a shared-memory
 * all-reduce is read and written at least once by some core.
 *
 *   gcc -O2 -march=native -o membw bench/membw.c && ./membw
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  size_t mb = 256;
  int reps = 7, json = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--mb") && i + 1 < argc)
      mb = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json"))
      json = 1;
    else {
      fprintf(stderr, "usage: %s [--mb MB] [--reps N] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 1000 || mb < 1) return 2;
  const size_t n = mb * 1000 * 1000 / sizeof(float);
  float* a = aligned_alloc(64, n * sizeof(float));
  float* b = aligned_alloc(64, n * sizeof(float));
  float* c = aligned_alloc(64, n * sizeof(float));
  if (!a || !b || !c) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < n; ++i) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
  double copy[1000], triad[1000];
  const float s = 3.0f;
  for (int r = 0; r < reps; ++r) {
    double t = now();
    for (size_t i = 0; i < n; ++i) c[i] = a[i];
    copy[r] = 2.0 * n * sizeof(float) / (now() - t) * 1e-9;
    t = now();
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    triad[r] = 3.0 * n * sizeof(float) / (now() - t) * 1e-9;
  }
  volatile float sink = a[n / 2] + c[n / 3];
  (void)sink;
  qsort(copy, reps, sizeof(double), cmp);
  qsort(triad, reps, sizeof(double), cmp);
  const double cm = copy[reps / 2], tm = triad[reps / 2];
  printf(
      "membw: %zu MB arrays, %d reps, one core: copy %.1f GB/s (best %.1f), triad %.1f GB/s "
      "(best %.1f)\n",
      mb, reps, cm, copy[reps - 1], tm, triad[reps - 1]);
  if (json)
    printf(
        "{\"mb\": %zu, \"reps\": %d, \"copy_gbps\": %.3f, \"copy_best_gbps\": %.3f, "
        "\"triad_gbps\": %.3f, \"triad_best_gbps\": %.3f}\n",
        mb, reps, cm, copy[reps - 1], tm, triad[reps - 1]);
  free(a);
  free(b);
  free(c);
  return 0;
}
