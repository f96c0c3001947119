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

/* How far the middle half of the trials spread, over their median: (third quartile - first)
   / median, of times[0..n) that median() has sorted; over all of them when n < 4. */
static inline double spread(const double *sorted, int n) {
  double lo = sorted[(n - 1) / 4], hi = sorted[n - 1 - (n - 1) / 4];
  double middle = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return middle > 0 ? (hi - lo) / middle : 0.0;
}

#endif
