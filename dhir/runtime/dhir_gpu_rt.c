/* dhir's GPU runtime: the `mgpu*` entry points that MLIR's gpu-to-llvm lowering and the
 * translation of gpu.binary call, implemented on the CUDA driver API.
 *
 * The driver (libcuda.so.1) is loaded with dlopen the first time a rank uses its GPU, so a
 * program links and runs anywhere, and ranks that never run a GPU task never need a GPU.
 * Kernel binaries are registered by global constructors before `main`, but only loaded when
 * one of their kernels is first launched. Every failure goes through dhir_rt_fatal, naming
 * the GPU task that was running (set by dhir_rt_gpu_task before each one).
 *
 * Device choice: the GPU the machine description gives the rank, when the program was
 * built with one (mgpuSetDefaultDevice before the first use); else the ranks of a node take
 * its GPUs by their local rank (MPI_LOCALRANKID under MPICH, OMPI_COMM_WORLD_LOCAL_RANK
 * under OpenMPI, SLURM_LOCALID under srun), modulo the device count. DHIR_GPU_DEVICE=N
 * forces device N.
 *
 * DHIR_GPU_STATS=1 prints what each rank did with its GPU (kernel launches, copies by
 * direction, allocations) to standard error at exit; any other value names a file the
 * lines are appended to. DHIR_CUDA_DRIVER=/path/libcuda.so.1 loads another driver (tests
 * use a fake one). */
#include "dhir_rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few driver API types and constants used here (no CUDA headers needed to build). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct {
  char reserved[64];
} CUipcMemHandle;

enum {
  CUDA_SUCCESS = 0,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  CU_MEM_ATTACH_GLOBAL = 1,
  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
};

/* The driver's entry points, resolved by name when the driver is loaded. */
static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent); /* optional: the trace's GPU track */
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*MemHostRegister)(void *, size_t, unsigned); /* optional */
  CUresult (*MemHostUnregister)(void *);
  CUresult (*MemAllocHost)(void **, size_t); /* optional: page-locked staging buffers */
  CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr); /* optional: peer copies */
  CUresult (*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
  CUresult (*IpcCloseMemHandle)(CUdeviceptr);
  CUresult (*GetErrorString)(CUresult, const char **);
} cu;

static const char *current_task = NULL; /* "GPU task "name" at file:line:col" */
static bool ready = false;
static CUdevice device = 0;
static int device_number = 0;
static int capability = 0; /* 90 for compute capability 9.0 */

/* --- errors ------------------------------------------------------------------------- */

/* A setting's value as a whole number; anything else (4MiB, abc) stops the run rather than
   being read as its leading digits, or as 0. */
static long long whole_number(const char *name, const char *value) {
  char *end = NULL;
  errno = 0;
  long long number = strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE || number < 0 || number > INT32_MAX)
    dhir_rt_fatal("%s=%s: expected a whole number of at most %d", name, value, INT32_MAX);
  return number;
}

static const char *task_text(void) {
  return current_task != NULL ? current_task : "a GPU task";
}

static const char *error_text(CUresult code) {
  const char *text = NULL;
  if (cu.GetErrorString == NULL || cu.GetErrorString(code, &text) != CUDA_SUCCESS || !text)
    text = "unknown error";
  return text;
}

static void check(CUresult code, const char *call) {
  if (code == CUDA_SUCCESS)
    return;
  dhir_rt_fatal("%s: %s failed on GPU %d: %s (CUDA error %d)", task_text(), call,
                device_number, error_text(code), code);
}

/* Called by lowered code before each GPU task (and before allocating its buffers). A
   rank that sent device buffers (see "messages" below) drives those sends on from here:
   MPI moves a large message only inside its calls, and a receiver may be waiting. */
void dhir_rt_gpu_task(int64_t where) {
  current_task = (const char *)(intptr_t)where;
  dhir_rt_device_progress();
}

/* Messages between device buffers on two ranks (see "messages" below). */
void dhir_rt_gpu_send(int64_t device, int32_t dest, int32_t tag);
void dhir_rt_gpu_recv(int64_t device, int32_t source, int32_t tag);
void dhir_rt_gpu_ready(int64_t device);
void dhir_rt_gpu_ready_rows(int32_t tag);
static void ready_rows_of(uintptr_t device);

/* --- statistics --------------------------------------------------------------------- */

static struct {
  long launches, allocs, frees, modules, pins;
  long copies[3]; /* host to device, device to host, device to device */
  long long bytes[3], pinned;
  long sent, received; /* messages between device buffers (dhir_rt_gpu_send/recv) */
  long long sent_bytes, received_bytes;
  long long staged, peer; /* bytes through host buffers (both ends), copied from a peer */
} stats;

enum { H2D, D2H, D2D };

/* Device allocations, to tell the direction of a copy (and to count it). */
static struct {
  uintptr_t start;
  size_t size;
} *buffers;
static size_t buffer_count, buffer_capacity;

static bool on_device(const void *pointer) {
  uintptr_t p = (uintptr_t)pointer;
  for (size_t i = 0; i < buffer_count; ++i)
    if (p >= buffers[i].start && p < buffers[i].start + (buffers[i].size ? buffers[i].size : 1))
      return true;
  return false;
}

/* `items` (holding `count`) with room for one more, twice as much as before when full. */
static void *grow(void *items, size_t *capacity, size_t count, size_t size) {
  if (count < *capacity)
    return items;
  *capacity = *capacity ? 2 * *capacity : 16;
  items = realloc(items, *capacity * size);
  if (items == NULL)
    dhir_rt_fatal("out of host memory");
  return items;
}

static void remember(void *pointer, size_t size) {
  buffers = grow(buffers, &buffer_capacity, buffer_count, sizeof *buffers);
  buffers[buffer_count].start = (uintptr_t)pointer;
  buffers[buffer_count].size = size;
  ++buffer_count;
}

/* The size of the device allocation that starts at `start`; 0 for none. */
static size_t size_of(uintptr_t start) {
  for (size_t i = 0; i < buffer_count; ++i)
    if (buffers[i].start == start)
      return buffers[i].size;
  return 0;
}

static void forget(void *pointer) {
  for (size_t i = 0; i < buffer_count; ++i)
    if (buffers[i].start == (uintptr_t)pointer) {
      buffers[i] = buffers[--buffer_count];
      return;
    }
}

static void print_stats(void) {
  const char *where = getenv("DHIR_GPU_STATS");
  if (where == NULL || *where == '\0' || strcmp(where, "0") == 0)
    return;
  char line[512];
  snprintf(line, sizeof line,
           "dhir: GPU stats on rank %d (device %d): launches=%ld h2d=%ld (%lld bytes) "
           "d2h=%ld (%lld bytes) d2d=%ld (%lld bytes) allocs=%ld frees=%ld modules=%ld "
           "pins=%ld (%lld bytes) sent=%ld (%lld bytes) received=%ld (%lld bytes) "
           "staged=%lld peer=%lld\n",
           dhir_rt_comm_rank(), device_number, stats.launches, stats.copies[H2D],
           stats.bytes[H2D], stats.copies[D2H], stats.bytes[D2H], stats.copies[D2D],
           stats.bytes[D2D], stats.allocs, stats.frees, stats.modules, stats.pins,
           stats.pinned, stats.sent, stats.sent_bytes, stats.received, stats.received_bytes,
           stats.staged, stats.peer);
  FILE *out = strcmp(where, "1") == 0 ? stderr : fopen(where, "a");
  if (out == NULL)
    return;
  fputs(line, out);
  if (out != stderr)
    fclose(out);
}

/* --- the trace's GPU track ----------------------------------------------------------- */

/* Under `dhir run --trace`, each kernel and copy is bracketed by two CUDA events on its
   stream; once the host has waited for the stream, their times, measured on the GPU from
   an anchor event whose moment on the trace's clock is known, go to the trace
   (dhir_rt_trace_gpu). The anchor is read right after the host waited for it, so the GPU
   track may sit a few microseconds early against the host's. */

typedef struct {
  CUstream stream;
  CUevent begin, end;
  const char *kernel; /* NULL for a copy */
  int direction;
  size_t bytes;
} Timed;

static bool timing = false;
static CUevent anchor;
static int64_t anchor_ns;
static Timed *timed;
static size_t timed_count, timed_room;

static void start_timing(void) {
  if (!dhir_rt_tracing() || cu.EventElapsedTime == NULL)
    return;
  check(cu.EventCreate(&anchor, 0), "cuEventCreate");
  check(cu.EventRecord(anchor, NULL), "cuEventRecord");
  check(cu.EventSynchronize(anchor), "cuEventSynchronize");
  anchor_ns = dhir_rt_trace_clock();
  timing = true;
}

static CUevent mark(CUstream stream) {
  CUevent event = NULL;
  check(cu.EventCreate(&event, 0), "cuEventCreate");
  check(cu.EventRecord(event, stream), "cuEventRecord");
  return event;
}

static int64_t moment(CUevent event) {
  float ms = 0;
  check(cu.EventElapsedTime(&ms, anchor, event), "cuEventElapsedTime");
  return anchor_ns + (int64_t)((double)ms * 1e6);
}

static void keep_timed(Timed entry) {
  timed = grow(timed, &timed_room, timed_count, sizeof *timed);
  timed[timed_count++] = entry;
}

/* After the host waited for `stream`: its timed work goes to the trace. */
static void settle(CUstream stream) {
  size_t kept = 0;
  for (size_t i = 0; i < timed_count; ++i) {
    Timed *entry = &timed[i];
    if (entry->stream != stream) {
      timed[kept++] = *entry;
      continue;
    }
    dhir_rt_trace_gpu(moment(entry->begin), moment(entry->end), entry->kernel, entry->direction,
                      (int64_t)entry->bytes);
    check(cu.EventDestroy(entry->begin), "cuEventDestroy");
    check(cu.EventDestroy(entry->end), "cuEventDestroy");
  }
  timed_count = kept;
}

/* Kernels by function, for their names in the trace. */
static struct {
  CUfunction function;
  char *name;
} *kernels;
static size_t kernel_count, kernel_room;

static const char *kernel_name(CUfunction function) {
  for (size_t i = 0; i < kernel_count; ++i)
    if (kernels[i].function == function)
      return kernels[i].name;
  return "kernel";
}

static void name_kernel(CUfunction function, const char *name) {
  if (!timing)
    return;
  kernels = grow(kernels, &kernel_room, kernel_count, sizeof *kernels);
  kernels[kernel_count].function = function;
  kernels[kernel_count++].name = strdup(name);
}

/* --- the driver --------------------------------------------------------------------- */

static void *symbol(void *library, const char *name, bool required) {
  void *found = dlsym(library, name);
  if (found == NULL && required)
    dhir_rt_fatal("%s: the CUDA driver has no %s; it is too old for dhir (update the NVIDIA "
                  "driver)",
                  task_text(), name);
  return found;
}

#define RESOLVE(field, name) (*(void **)&cu.field = symbol(library, name, true))

static void *open_driver(void) {
  const char *path = getenv("DHIR_CUDA_DRIVER");
  void *library = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL)
    dhir_rt_fatal("%s needs an NVIDIA GPU, but the CUDA driver cannot be loaded (%s). Run it "
                  "on a machine with an NVIDIA GPU and driver, or build with --gpu-fallback=cpu "
                  "to run GPU tasks written as loops on the CPU",
                  task_text(), dlerror());
  return library;
}

static int local_rank(void) {
  static const char *variables[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof variables / sizeof *variables; ++i) {
    const char *value = getenv(variables[i]);
    if (value != NULL && *value != '\0')
      return atoi(value);
  }
  int rank = dhir_rt_comm_rank();
  return rank > 0 ? rank : 0;
}

/* The GPU the machine description gives this rank (mgpuSetDefaultDevice), or -1. */
static int described_device = -1;

static void choose_device(void) {
  int count = 0;
  check(cu.DeviceGetCount(&count), "cuDeviceGetCount");
  if (count < 1)
    dhir_rt_fatal("%s needs an NVIDIA GPU, but the CUDA driver sees none on this node "
                  "(check CUDA_VISIBLE_DEVICES)",
                  task_text());
  const char *forced = getenv("DHIR_GPU_DEVICE");
  if (forced != NULL && *forced) {
    device_number = (int)whole_number("DHIR_GPU_DEVICE", forced);
    if (device_number < 0 || device_number >= count)
      dhir_rt_fatal("DHIR_GPU_DEVICE=%s, but this node has %d GPUs (0..%d)", forced, count,
                    count - 1);
  } else if (described_device >= 0) {
    device_number = described_device;
    if (device_number >= count)
      dhir_rt_fatal("%s: the machine description gives this rank GPU %d of its node, but the "
                    "CUDA driver sees %d GPUs here (0..%d)",
                    task_text(), device_number, count, count - 1);
  } else {
    device_number = local_rank() % count;
  }
  check(cu.DeviceGet(&device, device_number), "cuDeviceGet");
  int major = 0, minor = 0;
  check(cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute");
  check(cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute");
  capability = 10 * major + minor;
  CUcontext context = NULL;
  check(cu.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(context), "cuCtxSetCurrent");
}

static void start(void) {
  if (ready)
    return;
  void *library = open_driver();
  RESOLVE(GetErrorString, "cuGetErrorString");
  RESOLVE(Init, "cuInit");
  RESOLVE(DeviceGetCount, "cuDeviceGetCount");
  RESOLVE(DeviceGet, "cuDeviceGet");
  RESOLVE(DeviceGetAttribute, "cuDeviceGetAttribute");
  RESOLVE(DeviceGetName, "cuDeviceGetName");
  RESOLVE(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  RESOLVE(CtxSetCurrent, "cuCtxSetCurrent");
  RESOLVE(ModuleLoadData, "cuModuleLoadData");
  RESOLVE(ModuleLoadDataEx, "cuModuleLoadDataEx");
  RESOLVE(ModuleUnload, "cuModuleUnload");
  RESOLVE(ModuleGetFunction, "cuModuleGetFunction");
  RESOLVE(LaunchKernel, "cuLaunchKernel");
  RESOLVE(StreamCreate, "cuStreamCreate");
  RESOLVE(StreamSynchronize, "cuStreamSynchronize");
  RESOLVE(StreamDestroy, "cuStreamDestroy_v2");
  RESOLVE(StreamWaitEvent, "cuStreamWaitEvent");
  RESOLVE(EventCreate, "cuEventCreate");
  RESOLVE(EventDestroy, "cuEventDestroy_v2");
  RESOLVE(EventSynchronize, "cuEventSynchronize");
  RESOLVE(EventRecord, "cuEventRecord");
  RESOLVE(MemAlloc, "cuMemAlloc_v2");
  RESOLVE(MemAllocManaged, "cuMemAllocManaged");
  RESOLVE(MemFree, "cuMemFree_v2");
  RESOLVE(MemcpyAsync, "cuMemcpyAsync");
  RESOLVE(MemsetD32Async, "cuMemsetD32Async");
  RESOLVE(MemsetD16Async, "cuMemsetD16Async");
  *(void **)&cu.EventElapsedTime = symbol(library, "cuEventElapsedTime", false);
  *(void **)&cu.MemHostRegister = symbol(library, "cuMemHostRegister_v2", false);
  *(void **)&cu.MemHostUnregister = symbol(library, "cuMemHostUnregister", false);
  *(void **)&cu.MemAllocHost = symbol(library, "cuMemAllocHost_v2", false);
  *(void **)&cu.IpcGetMemHandle = symbol(library, "cuIpcGetMemHandle", false);
  *(void **)&cu.IpcOpenMemHandle = symbol(library, "cuIpcOpenMemHandle_v2", false);
  *(void **)&cu.IpcCloseMemHandle = symbol(library, "cuIpcCloseMemHandle", false);
  check(cu.Init(0), "cuInit");
  choose_device();
  ready = true;
  start_timing();
  atexit(print_stats);
}

/* --- modules and kernels ------------------------------------------------------------ */

/* A kernel binary as registered before main; loaded on first use. */
typedef struct {
  const void *data;
  size_t size; /* 0 for PTX, compiled by the driver */
  int opt_level;
  CUmodule module;
} Binary;

void *mgpuModuleLoad(void *data, size_t size) {
  Binary *binary = calloc(1, sizeof *binary);
  if (binary == NULL)
    dhir_rt_fatal("out of host memory");
  binary->data = data;
  binary->size = size;
  return binary;
}

void *mgpuModuleLoadJIT(void *data, int opt_level) {
  Binary *binary = mgpuModuleLoad(data, 0);
  binary->opt_level = opt_level;
  return binary;
}

void mgpuModuleUnload(void *handle) {
  Binary *binary = handle;
  if (binary == NULL)
    return;
  /* At exit: a failure here changes nothing the program computed, so it is ignored. */
  if (binary->module != NULL && ready)
    cu.ModuleUnload(binary->module);
  free(binary);
}

static void load(Binary *binary) {
  char log[8192] = "";
  CUresult code;
  if (binary->size == 0) {
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                     CU_JIT_OPTIMIZATION_LEVEL};
    void *values[] = {log, (void *)(uintptr_t)sizeof log, (void *)(intptr_t)binary->opt_level};
    code = cu.ModuleLoadDataEx(&binary->module, binary->data, 3, options, values);
  } else {
    code = cu.ModuleLoadData(&binary->module, binary->data);
  }
  if (code != CUDA_SUCCESS) {
    const char *text = NULL;
    if (cu.GetErrorString(code, &text) != CUDA_SUCCESS || text == NULL)
      text = "unknown error";
    dhir_rt_fatal("%s: its kernels cannot be loaded on GPU %d (compute capability %d.%d): %s "
                  "(CUDA error %d)%s%s. Was it built for another chip? Bind the task to this "
                  "GPU's arch (sm_%d) or to {kind = \"gpu\"}",
                  task_text(), device_number, capability / 10, capability % 10, text, code,
                  log[0] ? "; " : "", log, capability);
  }
  ++stats.modules;
}

void *mgpuModuleGetFunction(void *handle, const char *name) {
  start();
  Binary *binary = handle;
  if (binary->module == NULL)
    load(binary);
  CUfunction function = NULL;
  check(cu.ModuleGetFunction(&function, binary->module, name), "cuModuleGetFunction");
  name_kernel(function, name);
  return function;
}

void mgpuLaunchKernel(void *function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z,
                      intptr_t block_x, intptr_t block_y, intptr_t block_z, int32_t shared_bytes,
                      void *stream, void **params, void **extra, size_t param_count) {
  (void)param_count;
  start();
  if (grid_x < 1 || grid_y < 1 || grid_z < 1 || block_x < 1 || block_y < 1 || block_z < 1)
    return; /* an empty loop: nothing to run (the driver would reject a zero-sized grid) */
  if (grid_x > INT32_MAX || grid_y > 65535 || grid_z > 65535)
    dhir_rt_fatal("%s: a kernel needs a grid of %lld x %lld x %lld blocks; CUDA allows at "
                  "most 2147483647 x 65535 x 65535 (loops mapped to y and z have at most "
                  "524280 and 131070 iterations): split the loop or swap its dimensions",
                  task_text(), (long long)grid_x, (long long)grid_y, (long long)grid_z);
  /* The driver takes the size unsigned (-1 would ask for 4 GiB) and refuses more than 48 KiB
     unless the kernel opts in (cuFuncSetAttribute), which dhir never does. */
  if (shared_bytes < 0 || shared_bytes > 48 * 1024)
    dhir_rt_fatal("%s: a kernel asks for %d bytes of dynamic shared memory "
                  "(dynamic_shared_memory_size); CUDA gives a launch from 0 to 49152 bytes, with "
                  "its workgroup attributions: use smaller tiles",
                  task_text(), (int)shared_bytes);
  ++stats.launches;
  CUevent begin = timing ? mark(stream) : NULL;
  check(cu.LaunchKernel(function, (unsigned)grid_x, (unsigned)grid_y, (unsigned)grid_z,
                        (unsigned)block_x, (unsigned)block_y, (unsigned)block_z,
                        (unsigned)shared_bytes, stream, params, extra),
        "cuLaunchKernel");
  if (timing)
    keep_timed((Timed){stream, begin, mark(stream), kernel_name(function), 0, 0});
}

/* --- streams and events ------------------------------------------------------------- */

/* Lowered code makes a stream per stretch of GPU work; a small pool reuses them. */
static CUstream pool[16];
static int pooled = 0;

void *mgpuStreamCreate(void) {
  start();
  if (pooled > 0)
    return pool[--pooled];
  CUstream stream = NULL;
  check(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return stream;
}

void mgpuStreamSynchronize(void *stream) {
  start();
  check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  if (timing)
    settle(stream);
}

void mgpuStreamDestroy(void *stream) {
  start();
  bool kept = pooled < (int)(sizeof pool / sizeof *pool);
  if (kept || timing)
    check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  if (timing)
    settle(stream);
  if (kept)
    pool[pooled++] = stream;
  else
    check(cu.StreamDestroy(stream), "cuStreamDestroy");
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  start();
  check(cu.StreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}

void *mgpuEventCreate(void) {
  start();
  CUevent event = NULL;
  check(cu.EventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return event;
}

void mgpuEventDestroy(void *event) {
  start();
  check(cu.EventDestroy(event), "cuEventDestroy");
}

void mgpuEventSynchronize(void *event) {
  start();
  check(cu.EventSynchronize(event), "cuEventSynchronize");
}

void mgpuEventRecord(void *event, void *stream) {
  start();
  check(cu.EventRecord(event, stream), "cuEventRecord");
}

/* --- page-locked host memory -------------------------------------------------------- */

/* dhir-gpu-data pairs each device buffer with the host memref it is copied from and to
   (dhir_rt_gpu_pair). A copy from or to page-locked host memory runs at the link's rate
   and asynchronously; a copy from pageable memory goes through the driver's own staging
   buffers, several times slower. Locking has a cost that grows more slowly than the copy
   it speeds up (docs/gpu.md has the figures), and it must end before the memory is freed.
   So, by DHIR_GPU_PIN:
   - auto (the default): a host memref that lasts the whole run (an argument of the entry,
     a global) is locked on its first copy from LOCK_AT_ONCE bytes, else on its second,
     and stays locked until the entry returns (dhir_rt_gpu_unpin_all), however many
     schedules copy it; a shorter-lived one (an allocation) is locked on its first copy
     from LOCK_SHORT bytes, for as long as its device buffer lives;
   - always: every paired host memref on its first copy;
   - never: nothing is locked.
   Locking is an optimisation: where the driver refuses it, copies stay pageable. */

enum { LOCK_AT_ONCE = 64 << 20, LOCK_SHORT = 128 << 20 };

typedef struct {
  uintptr_t device, host, locked; /* locked: the address to unlock */
  size_t size;
  bool lasting, pinned, tried;
} Pair;

typedef struct {
  uintptr_t host, locked;
  size_t size;
  int copies;
  bool pinned, refused;
} Lasting;

static Pair *pairs;
static size_t pair_count, pair_capacity;
static Lasting *lastings;
static size_t lasting_count, lasting_capacity;

enum { PIN_NEVER, PIN_AUTO, PIN_ALWAYS };

static int pin_policy(void) {
  static int policy = -1;
  if (policy < 0) {
    const char *value = getenv("DHIR_GPU_PIN");
    policy = PIN_AUTO;
    if (value != NULL && strcmp(value, "never") == 0)
      policy = PIN_NEVER;
    else if (value != NULL && strcmp(value, "always") == 0)
      policy = PIN_ALWAYS;
    else if (value != NULL && *value && strcmp(value, "auto") != 0)
      dhir_rt_fatal("DHIR_GPU_PIN=%s: expected auto, always or never", value);
  }
  return policy;
}

/* Locks the part of [host, host + size) this process holds: all of it, or the rows it
   holds of a partitioned argument. */
static bool lock(uintptr_t host, size_t size, uintptr_t *locked) {
  if (cu.MemHostRegister == NULL || cu.MemHostUnregister == NULL)
    return false;
  int64_t bytes = (int64_t)size;
  dhir_rt_held_part(&host, &bytes);
  if (bytes <= 0 || cu.MemHostRegister((void *)host, (size_t)bytes, 0) != CUDA_SUCCESS)
    return false;
  ++stats.pins;
  stats.pinned += (long long)bytes;
  *locked = host;
  return true;
}

static void unlock(uintptr_t host) {
  check(cu.MemHostUnregister((void *)host), "cuMemHostUnregister");
}

static Lasting *lasting_of(uintptr_t host, size_t size) {
  for (size_t i = 0; i < lasting_count; ++i)
    if (lastings[i].host == host && lastings[i].size == size)
      return &lastings[i];
  lastings = grow(lastings, &lasting_capacity, lasting_count, sizeof *lastings);
  lastings[lasting_count] = (Lasting){host, 0, size, 0, false, false};
  return &lastings[lasting_count++];
}

/* Called by lowered code after allocating `device` for the host memref at `host`. */
void dhir_rt_gpu_pair(int64_t device, int64_t host, int64_t lasting) {
  size_t size = size_of((uintptr_t)device);
  if (size == 0 || pin_policy() == PIN_NEVER)
    return;
  pairs = grow(pairs, &pair_capacity, pair_count, sizeof *pairs);
  pairs[pair_count++] = (Pair){(uintptr_t)device, (uintptr_t)host, 0, size, lasting != 0,
                               false, false};
}

/* Before a copy between `device` and `host`: lock the host side if it is time to. */
static void before_copy(uintptr_t device, uintptr_t host) {
  for (size_t i = 0; i < pair_count; ++i) {
    Pair *pair = &pairs[i];
    if (device - pair->device >= pair->size || host - pair->host >= pair->size)
      continue;
    bool always = pin_policy() == PIN_ALWAYS;
    if (!pair->lasting) {
      if (!pair->tried && (always || pair->size >= LOCK_SHORT))
        pair->pinned = lock(pair->host, pair->size, &pair->locked);
      pair->tried = true;
      return;
    }
    Lasting *held = lasting_of(pair->host, pair->size);
    int needed = always || pair->size >= LOCK_AT_ONCE ? 1 : 2;
    if (!held->pinned && !held->refused && ++held->copies >= needed) {
      held->pinned = lock(held->host, held->size, &held->locked);
      held->refused = !held->pinned;
    }
    return;
  }
}

static void unpair(uintptr_t device) {
  for (size_t i = 0; i < pair_count; ++i)
    if (pairs[i].device == device) {
      if (pairs[i].pinned)
        unlock(pairs[i].locked);
      pairs[i] = pairs[--pair_count];
      return;
    }
}

/* Called by lowered code before the entry returns: its arguments may be freed next. */
void dhir_rt_gpu_unpin_all(void) {
  for (size_t i = 0; i < lasting_count; ++i)
    if (lastings[i].pinned)
      unlock(lastings[i].locked);
  lasting_count = 0;
}

/* --- memory ------------------------------------------------------------------------- */

void *mgpuMemAlloc(uint64_t bytes, void *stream, bool host_shared) {
  (void)stream;
  start();
  CUdeviceptr pointer = 0;
  /* A zero-sized memref still needs a distinct, valid address. */
  size_t size = bytes ? (size_t)bytes : 1;
  if (host_shared)
    check(cu.MemAllocManaged(&pointer, size, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  else
    check(cu.MemAlloc(&pointer, size), "cuMemAlloc");
  remember((void *)(uintptr_t)pointer, size);
  ++stats.allocs;
  return (void *)(uintptr_t)pointer;
}

void mgpuMemFree(void *pointer, void *stream) {
  start();
  if (stream != NULL)
    check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  dhir_rt_gpu_ready((int64_t)(uintptr_t)pointer);
  ready_rows_of((uintptr_t)pointer);
  forget(pointer);
  unpair((uintptr_t)pointer);
  ++stats.frees;
  check(cu.MemFree((CUdeviceptr)(uintptr_t)pointer), "cuMemFree");
}

void mgpuMemcpy(void *destination, void *source, size_t bytes, void *stream) {
  start();
  int direction = on_device(destination) ? (on_device(source) ? D2D : H2D) : D2H;
  if (direction == H2D)
    before_copy((uintptr_t)destination, (uintptr_t)source);
  else if (direction == D2H)
    before_copy((uintptr_t)source, (uintptr_t)destination);
  ++stats.copies[direction];
  stats.bytes[direction] += (long long)bytes;
  CUevent begin = timing ? mark(stream) : NULL;
  check(cu.MemcpyAsync((CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source,
                       bytes, stream),
        "cuMemcpyAsync");
  if (timing) {
    keep_timed((Timed){stream, begin, mark(stream), NULL, direction, bytes});
    if (stream == NULL) { /* the legacy stream: nothing waits for it by name */
      check(cu.StreamSynchronize(NULL), "cuStreamSynchronize");
      settle(NULL);
    }
  }
}

/* A copy of a row view (dhir-gpu-row-copies): addresses as integers, since MLIR 22 does
   not lower gpu.memcpy of a view with an offset. The host has waited for the GPU work
   before it; the copy is done when this returns, before the next GPU work starts. */
void dhir_rt_gpu_copy(int64_t destination, int64_t source, int64_t bytes) {
  void *stream = mgpuStreamCreate();
  mgpuMemcpy((void *)(uintptr_t)destination, (void *)(uintptr_t)source, (size_t)bytes, stream);
  mgpuStreamDestroy(stream);
}

/* --- messages between GPU tasks on two ranks ------------------------------------------

   dhir-gpu-data sends a device buffer whose value no host holds straight to the next GPU
   task that uses it on another rank: dhir_rt_gpu_send at the end of the writer, and
   dhir_rt_gpu_recv at the start of the reader, into its own buffer of the same memref (so
   of the same size). The way, by DHIR_GPU_MESSAGES (the same on every rank):
   - peer: the receiver copies from the sender's buffer itself, mapped into its process by
     CUDA IPC (a device-to-device copy, between two GPUs of the node or within one); only
     for ranks on one node; the sender's handle goes by MPI, and the receiver's word that
     it is done comes back;
   - direct: MPI is handed the device addresses (it must be CUDA-aware);
   - staged: through page-locked host buffers, in pieces of DHIR_GPU_STAGE_BYTES (default
     STAGE_BYTES): the sender's copies of later pieces overlap the messages of earlier
     ones, and the receiver's copy of a piece overlaps the message of the next;
   - auto (the default): peer between ranks of one node where the driver offers IPC, else
     direct where the MPI says it is CUDA-aware, else staged.
   A send never waits for its receiver, which may reach its task only after this rank's
   later ones: dhir_rt_gpu_ready(buffer), before the next GPU task here that uses the
   buffer, and freeing the buffer wait for its sends, and release their staging. */

enum { STAGE_BYTES = 4 << 20, DONE_TAG = 1 << 14 /* added to the tag of a peer copy's "done" */ };
enum { MESSAGES_AUTO, MESSAGES_STAGED, MESSAGES_DIRECT, MESSAGES_PEER };

static int message_policy(void) {
  static int policy = -1;
  if (policy < 0) {
    const char *value = getenv("DHIR_GPU_MESSAGES");
    if (value == NULL || *value == '\0' || strcmp(value, "auto") == 0)
      policy = MESSAGES_AUTO;
    else if (strcmp(value, "direct") == 0)
      policy = MESSAGES_DIRECT;
    else if (strcmp(value, "staged") == 0)
      policy = MESSAGES_STAGED;
    else if (strcmp(value, "peer") == 0)
      policy = MESSAGES_PEER;
    else
      dhir_rt_fatal("DHIR_GPU_MESSAGES=%s: expected auto, peer, direct or staged", value);
    /* In the output's tail that a failed run shows. */
    if (policy == MESSAGES_DIRECT && !dhir_rt_mpi_cuda_aware() && dhir_rt_comm_rank() == 0)
      fprintf(stderr, "dhir: warning: DHIR_GPU_MESSAGES=direct, but the MPI does not say it "
                      "is CUDA-aware (MPIX_Query_cuda_support): it may fail on device "
                      "addresses\n");
  }
  return policy;
}

static bool has_ipc(void) {
  return cu.IpcGetMemHandle != NULL && cu.IpcOpenMemHandle != NULL && cu.IpcCloseMemHandle != NULL;
}

/* The way a message to or from `other` goes; both ends decide alike. */
static int message_path(int32_t other) {
  int policy = message_policy();
  if (policy == MESSAGES_PEER) {
    if (!dhir_rt_same_node(other))
      dhir_rt_fatal("%s: DHIR_GPU_MESSAGES=peer, but rank %d is on another node; peer copies "
                    "need ranks of one node (use auto)",
                    task_text(), other);
    if (!has_ipc())
      dhir_rt_fatal("%s: DHIR_GPU_MESSAGES=peer, but the CUDA driver offers no IPC "
                    "(cuIpcOpenMemHandle_v2); use auto",
                    task_text());
    return MESSAGES_PEER;
  }
  if (policy != MESSAGES_AUTO)
    return policy;
  if (dhir_rt_same_node(other) && has_ipc())
    return MESSAGES_PEER;
  return dhir_rt_mpi_cuda_aware() ? MESSAGES_DIRECT : MESSAGES_STAGED;
}

static size_t stage_bytes(void) {
  const char *value = getenv("DHIR_GPU_STAGE_BYTES");
  long long bytes = value != NULL && *value ? whole_number("DHIR_GPU_STAGE_BYTES", value)
                                             : STAGE_BYTES;
  if (bytes < 1)
    dhir_rt_fatal("DHIR_GPU_STAGE_BYTES=%s: expected a positive number of bytes", value);
  return (size_t)bytes;
}

/* Host buffers for staged messages: page-locked where the driver allows, kept for reuse.
   `owner` is the device buffer whose send still uses it (0: free). */
typedef struct {
  char *data;
  size_t size;
  uintptr_t owner;
} Staging;

static Staging *stagings;
static size_t staging_count, staging_capacity;

static Staging *take_staging(size_t size, uintptr_t owner) {
  Staging *best = NULL;
  for (size_t i = 0; i < staging_count; ++i)
    if (stagings[i].owner == 0 && stagings[i].size >= size &&
        (best == NULL || stagings[i].size < best->size))
      best = &stagings[i];
  if (best == NULL) {
    void *data = NULL;
    if (cu.MemAllocHost == NULL || cu.MemAllocHost(&data, size) != CUDA_SUCCESS)
      data = malloc(size);
    if (data == NULL)
      dhir_rt_fatal("%s: cannot allocate %zu bytes of host memory to stage a message",
                    task_text(), size);
    stagings = grow(stagings, &staging_capacity, staging_count, sizeof *stagings);
    best = &stagings[staging_count++];
    *best = (Staging){data, size, 0};
  }
  best->owner = owner;
  return best;
}

static size_t buffer_size(int64_t device, const char *call) {
  size_t size = size_of((uintptr_t)device);
  if (size > 0)
    return size;
  dhir_rt_fatal("%s: %s was given %#llx, which is not a device buffer", task_text(), call,
                (unsigned long long)device);
}

/* `key`: what dhir_rt_gpu_ready waits on (the buffer, or a message of rows of it). */
static void staged_send(uintptr_t device, size_t size, int32_t dest, int32_t tag, int64_t key) {
  Staging *stage = take_staging(size, (uintptr_t)key);
  size_t piece = stage_bytes(), count = (size + piece - 1) / piece;
  CUstream stream = mgpuStreamCreate();
  CUevent *copied = calloc(count ? count : 1, sizeof *copied);
  if (copied == NULL)
    dhir_rt_fatal("out of host memory");
  for (size_t i = 0; i < count; ++i) {
    size_t at = i * piece, bytes = size - at < piece ? size - at : piece;
    check(cu.MemcpyAsync((CUdeviceptr)(uintptr_t)(stage->data + at), device + at, bytes, stream),
          "cuMemcpyAsync");
    check(cu.EventCreate(&copied[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(cu.EventRecord(copied[i], stream), "cuEventRecord");
  }
  for (size_t i = 0; i < count; ++i) {
    size_t at = i * piece, bytes = size - at < piece ? size - at : piece;
    check(cu.EventSynchronize(copied[i]), "cuEventSynchronize");
    check(cu.EventDestroy(copied[i]), "cuEventDestroy");
    dhir_rt_device_isend(stage->data + at, (int64_t)bytes, dest, tag, key);
  }
  free(copied);
  mgpuStreamDestroy(stream);
  stats.staged += (long long)size;
}

static void staged_recv(uintptr_t device, size_t size, int32_t source, int32_t tag) {
  Staging *stage = take_staging(size, device);
  size_t piece = stage_bytes();
  CUstream stream = mgpuStreamCreate();
  for (size_t at = 0; at < size; at += piece) {
    size_t bytes = size - at < piece ? size - at : piece;
    dhir_rt_device_recv(stage->data + at, (int64_t)bytes, source, tag);
    check(cu.MemcpyAsync(device + at, (CUdeviceptr)(uintptr_t)(stage->data + at), bytes, stream),
          "cuMemcpyAsync");
  }
  check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  mgpuStreamDestroy(stream);
  stage->owner = 0;
  stats.staged += (long long)size;
}

/* A handle of a buffer being sent by peer copy: kept until the receiver is done. */
typedef struct {
  uintptr_t device; /* its key (see staged_send) */
  CUipcMemHandle handle;
  char done; /* the receiver's word that it has copied */
} Exported;

static Exported **exported; /* each entry stays where it is while MPI sends it */
static size_t exported_count, exported_capacity;

/* A failed IPC call: what failed, and the way around it. */
static void check_peer(CUresult code, const char *call) {
  if (code == CUDA_SUCCESS)
    return;
  dhir_rt_fatal("%s: %s failed on GPU %d: %s (CUDA error %d); a peer copy between ranks needs "
                "CUDA IPC between their processes: set DHIR_GPU_MESSAGES=staged to send "
                "through host buffers instead",
                task_text(), call, device_number, error_text(code), code);
}

static void peer_send(uintptr_t device, int32_t dest, int32_t tag, int64_t key) {
  Exported *entry = malloc(sizeof *entry);
  if (entry == NULL)
    dhir_rt_fatal("out of host memory");
  entry->device = (uintptr_t)key;
  check_peer(cu.IpcGetMemHandle(&entry->handle, (CUdeviceptr)device), "cuIpcGetMemHandle");
  exported = grow(exported, &exported_capacity, exported_count, sizeof *exported);
  exported[exported_count++] = entry;
  /* Posted first, so the receiver's "done" never waits for it. */
  dhir_rt_device_irecv(&entry->done, 1, dest, tag + DONE_TAG, key);
  dhir_rt_device_isend(&entry->handle, sizeof entry->handle, dest, tag, key);
}

/* Copies `size` bytes at `offset` of the sender's buffer into the same place of `device`
   (the buffer's start: the handle maps the sender's whole buffer). */
static void peer_recv(uintptr_t device, size_t offset, size_t size, int32_t source,
                      int32_t tag) {
  CUipcMemHandle handle;
  dhir_rt_device_recv(&handle, sizeof handle, source, tag);
  CUdeviceptr there = 0;
  check_peer(cu.IpcOpenMemHandle(&there, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
             "cuIpcOpenMemHandle");
  CUstream stream = mgpuStreamCreate();
  check(cu.MemcpyAsync((CUdeviceptr)device + offset, there + offset, size, stream),
        "cuMemcpyAsync");
  check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  mgpuStreamDestroy(stream);
  check(cu.IpcCloseMemHandle(there), "cuIpcCloseMemHandle");
  static const char done = 1;
  dhir_rt_device_isend(&done, 1, source, tag + DONE_TAG, -1);
  dhir_rt_device_wait(-1); /* its receive is posted: this does not block */
  stats.peer += (long long)size;
}

void dhir_rt_gpu_send(int64_t device, int32_t dest, int32_t tag) {
  start();
  size_t size = buffer_size(device, "dhir_rt_gpu_send");
  int path = message_path(dest);
  if (path == MESSAGES_PEER)
    peer_send((uintptr_t)device, dest, tag, device);
  else if (path == MESSAGES_DIRECT)
    dhir_rt_device_isend((const void *)(uintptr_t)device, (int64_t)size, dest, tag, device);
  else
    staged_send((uintptr_t)device, size, dest, tag, device);
  ++stats.sent;
  stats.sent_bytes += (long long)size;
}

void dhir_rt_gpu_recv(int64_t device, int32_t source, int32_t tag) {
  start();
  size_t size = buffer_size(device, "dhir_rt_gpu_recv");
  int path = message_path(source);
  if (path == MESSAGES_PEER)
    peer_recv((uintptr_t)device, 0, size, source, tag);
  else if (path == MESSAGES_DIRECT)
    dhir_rt_device_recv((void *)(uintptr_t)device, (int64_t)size, source, tag);
  else
    staged_recv((uintptr_t)device, size, source, tag);
  ++stats.received;
  stats.received_bytes += (long long)size;
}

void dhir_rt_gpu_ready(int64_t device) {
  dhir_rt_device_wait(device);
  for (size_t i = 0; i < staging_count; ++i)
    if (stagings[i].owner == (uintptr_t)device)
      stagings[i].owner = 0;
  for (size_t i = 0; i < exported_count;)
    if (exported[i]->device == (uintptr_t)device) {
      free(exported[i]);
      exported[i] = exported[--exported_count];
    } else {
      ++i;
    }
}

/* --- messages of some rows of a device buffer (dhir.transforms.gpu_rows) ---------------

   `bytes` at `offset` of a device buffer, into the same place of the receiver's buffer of
   the same memref: the rows of a halo exchange, in the same ways as whole buffers. Each
   message has a tag of its own, and its sends are waited for by that tag: the sender's
   next task writing those rows calls dhir_rt_gpu_ready_rows(tag), and freeing the buffer
   waits for every message of it still in flight. */

static struct {
  int32_t tag;
  uintptr_t device;
} *row_sends;
static size_t row_send_count, row_send_capacity;

/* The key dhir_rt_device_wait waits on for message `tag`: below every buffer's address
   and below -1 (a peer copy's "done"). */
static int64_t row_key(int32_t tag) { return -2 - (int64_t)tag; }

static void check_rows(int64_t device, int64_t offset, int64_t bytes, const char *call) {
  size_t size = buffer_size(device, call);
  if (offset < 0 || bytes < 0 || (uint64_t)offset + (uint64_t)bytes > size)
    dhir_rt_fatal("%s: %s was given %lld bytes at %lld of a %zu-byte device buffer",
                  task_text(), call, (long long)bytes, (long long)offset, size);
}

void dhir_rt_gpu_send_rows(int64_t device, int64_t offset, int64_t bytes, int32_t dest,
                           int32_t tag) {
  start();
  check_rows(device, offset, bytes, "dhir_rt_gpu_send_rows");
  int64_t key = row_key(tag);
  int path = message_path(dest);
  uintptr_t from = (uintptr_t)device + (uintptr_t)offset;
  if (path == MESSAGES_PEER)
    peer_send((uintptr_t)device, dest, tag, key);
  else if (path == MESSAGES_DIRECT)
    dhir_rt_device_isend((const void *)from, bytes, dest, tag, key);
  else
    staged_send(from, (size_t)bytes, dest, tag, key);
  row_sends = grow(row_sends, &row_send_capacity, row_send_count, sizeof *row_sends);
  row_sends[row_send_count].tag = tag;
  row_sends[row_send_count++].device = (uintptr_t)device;
  ++stats.sent;
  stats.sent_bytes += (long long)bytes;
}

void dhir_rt_gpu_recv_rows(int64_t device, int64_t offset, int64_t bytes, int32_t source,
                           int32_t tag) {
  start();
  check_rows(device, offset, bytes, "dhir_rt_gpu_recv_rows");
  int path = message_path(source);
  uintptr_t into = (uintptr_t)device + (uintptr_t)offset;
  if (path == MESSAGES_PEER)
    peer_recv((uintptr_t)device, (size_t)offset, (size_t)bytes, source, tag);
  else if (path == MESSAGES_DIRECT)
    dhir_rt_device_recv((void *)into, bytes, source, tag);
  else
    staged_recv(into, (size_t)bytes, source, tag);
  ++stats.received;
  stats.received_bytes += (long long)bytes;
}

void dhir_rt_gpu_ready_rows(int32_t tag) {
  dhir_rt_gpu_ready(row_key(tag));
  for (size_t i = 0; i < row_send_count;)
    if (row_sends[i].tag == tag)
      row_sends[i] = row_sends[--row_send_count];
    else
      ++i;
}

/* Before `device` is freed: its messages of rows still in flight. */
static void ready_rows_of(uintptr_t device) {
  for (size_t i = 0; i < row_send_count;)
    if (row_sends[i].device == device)
      dhir_rt_gpu_ready_rows(row_sends[i].tag); /* removes it, and moves another here */
    else
      ++i;
}

void mgpuMemset32(void *destination, unsigned int value, size_t count, void *stream) {
  start();
  check(cu.MemsetD32Async((CUdeviceptr)(uintptr_t)destination, value, count, stream),
        "cuMemsetD32Async");
}

void mgpuMemset16(void *destination, unsigned short value, size_t count, void *stream) {
  start();
  check(cu.MemsetD16Async((CUdeviceptr)(uintptr_t)destination, value, count, stream),
        "cuMemsetD16Async");
}

void mgpuSetDefaultDevice(int32_t number) {
  /* The rank's GPU by the machine description (dhir-gpu-data), before the first use;
     DHIR_GPU_DEVICE still wins (see choose_device). */
  if (!ready)
    described_device = number;
}
