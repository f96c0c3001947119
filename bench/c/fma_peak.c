/* One core's f64 peak: independent vector multiply-adds, fused (FMA) or not (a multiply
 * then an add, each rounded), as many as registers hold. Prints GFLOP/s, counting two
 * flops per lane and operation pair. Built with clang -O2 -march=native. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The widest vectors the CPU has: a wider one would not fit the "+v" register below. */
#if defined(__AVX512F__)
#define LANES 8
#define CHAINS 16
#elif defined(__AVX__)
#define LANES 4
#define CHAINS 12 /* 16 registers: chains, x and y, and one to spare */
#else
#define LANES 2
#define CHAINS 12
#endif
typedef double vec __attribute__((vector_size(8 * LANES), aligned(8 * LANES)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double run(long rounds, int fused, double *sink) {
    vec acc[CHAINS], x, y;
    for (int c = 0; c < CHAINS; c++)
        for (int l = 0; l < LANES; l++) acc[c][l] = 1e-3 * (c + l);
    for (int l = 0; l < LANES; l++) { x[l] = 0.999999; y[l] = 1e-7; }
    double start = now();
    for (long r = 0; r < rounds; r++) {
        if (fused) {
            for (int c = 0; c < CHAINS; c++) acc[c] = __builtin_elementwise_fma(acc[c], x, y);
        } else {
            for (int c = 0; c < CHAINS; c++) {
                vec p = acc[c] * x;
                __asm__("" : "+v"(p)); /* keep the product rounded on its own */
                acc[c] = p + y;
            }
        }
    }
    double seconds = now() - start;
    for (int c = 0; c < CHAINS; c++) *sink += acc[c][0];
    return 2.0 * LANES * CHAINS * rounds / seconds / 1e9;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20000000;
    double sink = 0, best[2] = {0, 0};
    for (int trial = 0; trial < 5; trial++)
        for (int fused = 0; fused < 2; fused++) {
            double rate = run(rounds, fused, &sink);
            if (rate > best[fused]) best[fused] = rate;
        }
    printf("%.3f %.3f %g\n", best[1], best[0], sink);
    return 0;
}
