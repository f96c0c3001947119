/* A fake CUDA driver (libcuda.so.1) for testing dhir's GPU runtime on machines without a GPU.
 *
 * Device memory is host memory, copies are memmove, and kernels do not run: a
 * launch is only recorded. Every call is appended to the file named by FAKE_CUDA_LOG, one
 * line each ("cuMemAlloc_v2 4000"). Settings: FAKE_CUDA_DEVICES (default 1),
 * FAKE_CUDA_CC (compute capability as major*10+minor, default 90), FAKE_CUDA_FAIL (the name
 * of a call that then fails with CUDA_ERROR_OUT_OF_MEMORY).
 *
 * Page-locking keeps a list of the locked ranges and refuses what the driver refuses: a
 * range overlapping a locked one or holding pages the process has not mapped, unlocking
 * what is not locked. Ranges still locked when
 * the process exits are logged ("cuMemHostRegister_v2 left N").
 *
 * Module loading checks the chip like the driver does, roughly: a fatbin needs an entry for
 * an arch no newer than the device, PTX a `.target` no newer than the device.
 *
 * Device memory is shared memory (a memfd), so that IPC works between processes: a handle
 * names the owner's process and descriptor, and opening it maps the same pages. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  OUT_OF_MEMORY = 2,
  INVALID_VALUE = 1,
  INVALID_DEVICE = 101,
  INVALID_CONTEXT = 201,
  NO_BINARY_FOR_GPU = 209,
  NOT_FOUND = 500,
  ALREADY_REGISTERED = 712,
  NOT_REGISTERED = 713,
};

static void record(const char *format, ...) {
  const char *path = getenv("FAKE_CUDA_LOG");
  if (path == NULL)
    return;
  FILE *log = fopen(path, "a");
  if (log == NULL)
    return;
  va_list args;
  va_start(args, format);
  vfprintf(log, format, args);
  va_end(args);
  fputc('\n', log);
  fclose(log);
}

static int setting(const char *name, int fallback) {
  const char *value = getenv(name);
  return value != NULL && *value ? atoi(value) : fallback;
}

static int fails(const char *call) {
  const char *which = getenv("FAKE_CUDA_FAIL");
  return which != NULL && strcmp(which, call) == 0;
}

#define ENTER(call, ...)                                                                      \
  do {                                                                                        \
    record(call __VA_ARGS__);                                                                 \
    if (fails(call))                                                                          \
      return OUT_OF_MEMORY;                                                                   \
  } while (0)

CUresult cuGetErrorString(CUresult code, const char **text) {
  switch (code) {
  case OUT_OF_MEMORY: *text = "out of memory (fake)"; break;
  case NO_BINARY_FOR_GPU: *text = "no kernel image is available for execution on the device (fake)"; break;
  case INVALID_DEVICE: *text = "invalid device ordinal (fake)"; break;
  default: *text = "fake error"; break;
  }
  return OK;
}

CUresult cuInit(unsigned flags) { ENTER("cuInit", " %u", flags); return OK; }

CUresult cuDeviceGetCount(int *count) {
  ENTER("cuDeviceGetCount");
  *count = setting("FAKE_CUDA_DEVICES", 1);
  return OK;
}

CUresult cuDeviceGet(int *device, int ordinal) {
  ENTER("cuDeviceGet", " %d", ordinal);
  if (ordinal < 0 || ordinal >= setting("FAKE_CUDA_DEVICES", 1))
    return INVALID_DEVICE;
  *device = ordinal;
  return OK;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  (void)device;
  int cc = setting("FAKE_CUDA_CC", 90);
  *value = attribute == 75 ? cc / 10 : attribute == 76 ? cc % 10 : 0;
  return OK;
}

CUresult cuDeviceGetName(char *name, int length, int device) {
  snprintf(name, (size_t)length, "Fake GPU %d", device);
  return OK;
}

static int context_token;
CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
  ENTER("cuDevicePrimaryCtxRetain", " %d", device);
  *context = &context_token;
  return OK;
}

CUresult cuCtxSetCurrent(void *context) { (void)context; return OK; }

/* --- modules ------------------------------------------------------------------------ */

typedef struct { char name[256]; } Function;
typedef struct { int arch; } Module;

static int fatbin_fits(const unsigned char *data, int cc) {
  uint16_t header = *(const uint16_t *)(data + 6);
  uint64_t size = *(const uint64_t *)(data + 8);
  int best = 0;
  for (uint64_t at = header; at < header + size;) {
    const unsigned char *entry = data + at;
    uint32_t entry_header = *(const uint32_t *)(entry + 4);
    uint64_t payload = *(const uint64_t *)(entry + 8);
    int arch = (int)*(const uint32_t *)(entry + 28);
    if (arch <= cc && arch > best)
      best = arch;
    at += entry_header + payload;
  }
  return best;
}

static int ptx_target(const char *text) {
  const char *target = strstr(text, ".target sm_");
  return target != NULL ? atoi(target + strlen(".target sm_")) : 0;
}

static CUresult load(void **module, const void *data, const char *call) {
  int cc = setting("FAKE_CUDA_CC", 90);
  const unsigned char *bytes = data;
  int arch;
  if (*(const uint32_t *)bytes == 0xBA55ED50u) {
    arch = fatbin_fits(bytes, cc);
    record("%s fatbin fits=%d", call, arch);
    if (arch == 0)
      return NO_BINARY_FOR_GPU;
  } else {
    arch = ptx_target(data);
    record("%s ptx sm_%d", call, arch);
    if (arch == 0 || arch > cc)
      return NO_BINARY_FOR_GPU;
  }
  if (fails(call))
    return OUT_OF_MEMORY;
  Module *made = malloc(sizeof *made);
  made->arch = arch;
  *module = made;
  return OK;
}

CUresult cuModuleLoadData(void **module, const void *data) {
  return load(module, data, "cuModuleLoadData");
}

CUresult cuModuleLoadDataEx(void **module, const void *data, unsigned count, int *options,
                            void **values) {
  (void)count, (void)options, (void)values;
  return load(module, data, "cuModuleLoadDataEx");
}

CUresult cuModuleUnload(void *module) { record("cuModuleUnload"); free(module); return OK; }

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  (void)module;
  ENTER("cuModuleGetFunction", " %s", name);
  Function *made = malloc(sizeof *made);
  snprintf(made->name, sizeof made->name, "%s", name);
  *function = made;
  return OK;
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra) {
  (void)stream, (void)params, (void)extra;
  if (shared == 0)
    ENTER("cuLaunchKernel", " %s grid=%ux%ux%u block=%ux%ux%u", ((Function *)function)->name,
          gx, gy, gz, bx, by, bz);
  else
    ENTER("cuLaunchKernel", " %s grid=%ux%ux%u block=%ux%ux%u shared=%u",
          ((Function *)function)->name, gx, gy, gz, bx, by, bz, shared);
  return OK;
}

/* --- streams and events ------------------------------------------------------------- */

static int stream_count;
CUresult cuStreamCreate(void **stream, unsigned flags) {
  ENTER("cuStreamCreate", " %u", flags);
  *stream = malloc(1);
  ++stream_count;
  return OK;
}
CUresult cuStreamSynchronize(void *stream) { (void)stream; return OK; }
CUresult cuStreamDestroy_v2(void *stream) { record("cuStreamDestroy_v2"); free(stream); return OK; }
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  return OK;
}
/* An event is the host time it was recorded at (copies and launches are synchronous here). */
CUresult cuEventCreate(void **event, unsigned flags) {
  (void)flags;
  *event = calloc(1, sizeof(double));
  return *event ? OK : OUT_OF_MEMORY;
}
CUresult cuEventDestroy_v2(void *event) { free(event); return OK; }
CUresult cuEventSynchronize(void *event) { (void)event; return OK; }
CUresult cuEventRecord(void *event, void *stream) {
  (void)stream;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  *(double *)event = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
  return OK;
}

CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
  ENTER("cuEventElapsedTime");
  *ms = (float)(*(double *)end - *(double *)start);
  return OK;
}

/* --- memory ------------------------------------------------------------------------- */

/* Device allocations, and buffers of other processes mapped by IPC. */
typedef struct {
  uintptr_t start;
  size_t size;
  int fd; /* -1 for a mapping of another process's buffer */
} Mapping;

static Mapping mappings[4096];
static int mapping_count;

static CUresult map(CUdeviceptr *pointer, int fd, size_t bytes, int owned) {
  void *pages = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (pages == MAP_FAILED || mapping_count == 4096)
    return OUT_OF_MEMORY;
  mappings[mapping_count++] = (Mapping){(uintptr_t)pages, bytes ? bytes : 1, owned ? fd : -1};
  *pointer = (CUdeviceptr)(uintptr_t)pages;
  return OK;
}

static Mapping *mapping_at(CUdeviceptr pointer) {
  for (int i = 0; i < mapping_count; ++i)
    if (mappings[i].start == (uintptr_t)pointer)
      return &mappings[i];
  return NULL;
}

static void unmap(Mapping *found) {
  munmap((void *)found->start, found->size);
  if (found->fd >= 0)
    close(found->fd);
  *found = mappings[--mapping_count];
}

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  ENTER("cuMemAlloc_v2", " %zu", bytes);
  int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)(bytes ? bytes : 1)) != 0)
    return OUT_OF_MEMORY;
  return map(pointer, fd, bytes, 1);
}

CUresult cuMemAllocManaged(CUdeviceptr *pointer, size_t bytes, unsigned flags) {
  (void)flags;
  return cuMemAlloc_v2(pointer, bytes);
}

CUresult cuMemAllocHost_v2(void **pointer, size_t bytes) {
  ENTER("cuMemAllocHost_v2", " %zu", bytes);
  *pointer = malloc(bytes ? bytes : 1);
  return *pointer ? OK : OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  ENTER("cuMemFree_v2");
  Mapping *found = mapping_at(pointer);
  if (found == NULL || found->fd < 0)
    return INVALID_VALUE;
  unmap(found);
  return OK;
}

/* --- IPC ------------------------------------------------------------------------------ */

typedef struct {
  char reserved[64];
} CUipcMemHandle;

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr pointer) {
  ENTER("cuIpcGetMemHandle");
  Mapping *found = mapping_at(pointer);
  if (found == NULL || found->fd < 0)
    return INVALID_VALUE;
  memset(handle, 0, sizeof *handle);
  snprintf(handle->reserved, sizeof handle->reserved, "%d %d %zu", (int)getpid(), found->fd,
           found->size);
  return OK;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pointer, CUipcMemHandle handle, unsigned flags) {
  (void)flags;
  int pid = 0, fd = -1;
  size_t size = 0;
  if (sscanf(handle.reserved, "%d %d %zu", &pid, &fd, &size) != 3)
    return INVALID_VALUE;
  ENTER("cuIpcOpenMemHandle_v2", " %zu", size);
  if (pid == (int)getpid())
    return INVALID_CONTEXT; /* like the driver: not within one process */
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int opened = open(path, O_RDWR | O_CLOEXEC);
  if (opened < 0)
    return INVALID_VALUE;
  CUresult result = map(pointer, opened, size, 0);
  close(opened);
  return result;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) {
  ENTER("cuIpcCloseMemHandle");
  Mapping *found = mapping_at(pointer);
  if (found == NULL || found->fd >= 0)
    return INVALID_VALUE;
  unmap(found);
  return OK;
}

CUresult cuMemcpyAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes, void *stream) {
  (void)stream;
  ENTER("cuMemcpyAsync", " %zu", bytes);
  memmove((void *)(uintptr_t)to, (const void *)(uintptr_t)from, bytes);
  return OK;
}

CUresult cuMemsetD32Async(CUdeviceptr to, unsigned value, size_t count, void *stream) {
  (void)stream;
  uint32_t *words = (uint32_t *)(uintptr_t)to;
  for (size_t i = 0; i < count; ++i)
    words[i] = value;
  return OK;
}

CUresult cuMemsetD16Async(CUdeviceptr to, unsigned short value, size_t count, void *stream) {
  (void)stream;
  uint16_t *halves = (uint16_t *)(uintptr_t)to;
  for (size_t i = 0; i < count; ++i)
    halves[i] = value;
  return OK;
}

/* --- page-locked host memory ------------------------------------------------------------ */

static struct {
  uintptr_t start;
  size_t size;
} locked[256];
static int locked_count, watching;

static void locked_at_exit(void) {
  if (locked_count)
    record("cuMemHostRegister_v2 left %d", locked_count);
}

CUresult cuMemHostRegister_v2(void *pointer, size_t bytes, unsigned flags) {
  (void)flags;
  ENTER("cuMemHostRegister_v2", " %zu", bytes);
  /* The driver locks whole pages: two ranges sharing one cannot both be locked. */
  uintptr_t start = (uintptr_t)pointer & ~(uintptr_t)4095;
  bytes = (((uintptr_t)pointer + bytes + 4095) & ~(uintptr_t)4095) - start;
  for (int i = 0; i < locked_count; ++i)
    if (start < locked[i].start + locked[i].size && locked[i].start < start + bytes)
      return ALREADY_REGISTERED;
  unsigned char *pages = malloc(bytes / 4096 + 1);
  int unmapped = pages == NULL || mincore((void *)start, bytes, pages) != 0;
  free(pages);
  if (unmapped)
    return INVALID_VALUE;
  if (locked_count == 256)
    return OUT_OF_MEMORY;
  if (!watching++)
    atexit(locked_at_exit);
  locked[locked_count].start = start;
  locked[locked_count++].size = bytes;
  return OK;
}

CUresult cuMemHostUnregister(void *pointer) {
  ENTER("cuMemHostUnregister");
  for (int i = 0; i < locked_count; ++i)
    if (locked[i].start == ((uintptr_t)pointer & ~(uintptr_t)4095)) {
      locked[i] = locked[--locked_count];
      return OK;
    }
  return NOT_REGISTERED;
}
