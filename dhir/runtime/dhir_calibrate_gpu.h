/* Shared by the GPU calibration program and its kernel (dhir_calibrate_gpu*.c). */
#ifndef DHIR_CALIBRATE_GPU_H
#define DHIR_CALIBRATE_GPU_H

/* Independent FMA chains per thread of the kernel `dhir_fma`. */
#define DHIR_FMA_LANES 8

#endif
