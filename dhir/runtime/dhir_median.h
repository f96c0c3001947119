/* The median of trial times, shared by the calibration programs (dhir_calibrate*.c). */
#ifndef DHIR_MEDIAN_H
#define DHIR_MEDIAN_H

#include <stdlib.h>

static int dhir_by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of times[0..n), which it sorts. */
static double median(double *times, int n) {
  qsort(times, (size_t)n, sizeof(double), dhir_by_value);
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

#endif
