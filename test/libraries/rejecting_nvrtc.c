/*===- rejecting_nvrtc.c - An NVRTC that rejects every program, for the internal-error tests ----===
 *
 * The NVRTC entry points cubecc loads (codegen/cuda/nvrtc.cpp), with NVRTC's C ABI: it reports
 * version 13.0 and sm_75..sm_120, creates programs, and fails every compile with a log in NVRTC's
 * words. To cubecc that is a toolkit rejecting code cubecc wrote — cubecc's own bug — which every
 * subcommand must report as an internal error (exit 3): test/lit/tools/cubecc-internal-error.test
 * runs `cubecc compile` and `cubecc env build` with CUBECC_NVRTC naming this library.
 *
 *===-------------------------------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult; /* NVRTC_SUCCESS 0, NVRTC_ERROR_COMPILATION 6 */
typedef struct Program {
  char log[256];
} * nvrtcProgram;

#define EXPORT __attribute__((visibility("default")))

static const int kArchs[] = {75, 80, 86, 89, 90, 100, 120};

EXPORT const char *nvrtcGetErrorString(nvrtcResult result) {
  return result == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION";
}
EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) {
  *major = 13;
  *minor = 0;
  return 0;
}
EXPORT nvrtcResult nvrtcGetNumSupportedArchs(int *count) {
  *count = (int)(sizeof kArchs / sizeof kArchs[0]);
  return 0;
}
EXPORT nvrtcResult nvrtcGetSupportedArchs(int *archs) {
  memcpy(archs, kArchs, sizeof kArchs);
  return 0;
}
EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *program, const char *source, const char *name,
                                      int num_headers, const char *const *headers,
                                      const char *const *include_names) {
  (void)source, (void)num_headers, (void)headers, (void)include_names;
  *program = calloc(1, sizeof **program);
  if (!*program)
    return 1;
  strncpy((*program)->log, name ? name : "program.cu", 64);
  strcat((*program)->log,
         "(1): error: rejected by the test's NVRTC, which rejects every program\n");
  return 0;
}
EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int num_options,
                                       const char *const *options) {
  (void)program, (void)num_options, (void)options;
  return 6;
}
EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *program) {
  free(*program);
  *program = NULL;
  return 0;
}
EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program, size_t *size) {
  *size = strlen(program->log) + 1;
  return 0;
}
EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char *log) {
  strcpy(log, program->log);
  return 0;
}
EXPORT nvrtcResult nvrtcGetPTXSize(nvrtcProgram program, size_t *size) {
  (void)program;
  *size = 0;
  return 6;
}
EXPORT nvrtcResult nvrtcGetPTX(nvrtcProgram program, char *ptx) {
  (void)program, (void)ptx;
  return 6;
}
EXPORT nvrtcResult nvrtcGetCUBINSize(nvrtcProgram program, size_t *size) {
  (void)program;
  *size = 0;
  return 6;
}
EXPORT nvrtcResult nvrtcGetCUBIN(nvrtcProgram program, char *cubin) {
  (void)program, (void)cubin;
  return 6;
}
