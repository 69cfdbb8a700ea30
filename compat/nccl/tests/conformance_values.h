/*
 * What the conformance programs (nccl_conformance.c on host buffers, nccl_conformance_device.c on
 * device buffers) share: their checks, and the inputs and expected results of every datatype.
 * Values are small and exactly representable in every type. Knows only nccl.h.
 */
#ifndef BRAID_NCCL_CONFORMANCE_VALUES_H
#define BRAID_NCCL_CONFORMANCE_VALUES_H

#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gRank = -1;
static int gFailures = 0;

#define CHECK(cond, ...)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "rank %d, line %d: check failed: %s: ", gRank, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                    \
      fprintf(stderr, "\n");                                                           \
      ++gFailures;                                                                     \
    }                                                                                  \
  } while (0)

/* A call that must succeed; on failure the rest of the rank's checks would only cascade. */
#define NCCL_OK(call)                                                                        \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "rank %d, line %d: %s returned %d (%s): %s\n", gRank, __LINE__, #call, \
              (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL));                      \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* ---- element access for every datatype (values here are small, exactly representable) ---- */

static inline size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

static inline uint16_t toHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) == 0) return (uint16_t)(x >> 16);
  uint32_t sign = (x >> 16) & 0x8000u;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)exp << 10) | ((x >> 13) & 0x3ffu));
}

static inline float fromHalf(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t x = exp == 0 && man == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (man << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline void put(void* buf, size_t i, ncclDataType_t t, double v) {
  char* p = (char*)buf + i * typeSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t x = (int8_t)v;
      memcpy(p, &x, 1);
      break;
    }
    case ncclUint8: {
      uint8_t x = (uint8_t)v;
      memcpy(p, &x, 1);
      break;
    }
    case ncclInt32: {
      int32_t x = (int32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = (uint32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = (int64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = (uint64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclFloat16: {
      uint16_t x = toHalf((float)v);
      memcpy(p, &x, 2);
      break;
    }
    case ncclBfloat16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t x = (uint16_t)(bits >> 16);
      memcpy(p, &x, 2);
      break;
    }
    case ncclFloat32: {
      float x = (float)v;
      memcpy(p, &x, 4);
      break;
    }
    default: {
      double x = v;
      memcpy(p, &x, 8);
      break;
    }
  }
}

static inline double get(const void* buf, size_t i, ncclDataType_t t) {
  const char* p = (const char*)buf + i * typeSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case ncclUint8: {
      uint8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case ncclInt32: {
      int32_t x;
      memcpy(&x, p, 4);
      return x;
    }
    case ncclUint32: {
      uint32_t x;
      memcpy(&x, p, 4);
      return x;
    }
    case ncclInt64: {
      int64_t x;
      memcpy(&x, p, 8);
      return (double)x;
    }
    case ncclUint64: {
      uint64_t x;
      memcpy(&x, p, 8);
      return (double)x;
    }
    case ncclFloat16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return fromHalf(x);
    }
    case ncclBfloat16: {
      uint16_t x;
      memcpy(&x, p, 2);
      uint32_t bits = (uint32_t)x << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    case ncclFloat32: {
      float x;
      memcpy(&x, p, 4);
      return x;
    }
    default: {
      double x;
      memcpy(&x, p, 8);
      return x;
    }
  }
}

static inline int isInteger(ncclDataType_t t) { return t <= ncclUint64; }

/* Rank r's input element i: 1..3, so sums, products (3^7 < 2^12) and means stay exact. */
static inline double input(int r, size_t i) { return (double)((r + (int)i) % 3 + 1); }

static inline double expected(ncclRedOp_t op, ncclDataType_t t, int nranks, size_t i) {
  double acc = input(0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = input(r, i);
    switch (op) {
      case ncclSum:
      case ncclAvg: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = v > acc ? v : acc; break;
      case ncclMin: acc = v < acc ? v : acc; break;
      default: break;
    }
  }
  if (op == ncclAvg) acc = isInteger(t) ? floor(acc / nranks) : acc / nranks;
  return acc;
}

/* Integers and exact sums compare equal; a mean like 7/3 differs by the type's rounding. */
static inline int closeEnough(ncclDataType_t t, double got, double want) {
  double tolerance = 0;
  switch (t) {
    case ncclFloat16: tolerance = 1.0 / 1024; break;
    case ncclBfloat16: tolerance = 1.0 / 128; break;
    case ncclFloat32: tolerance = 1e-6; break;
    case ncclFloat64: tolerance = 1e-12; break;
    default: break;
  }
  return fabs(got - want) <= tolerance * fabs(want);
}

static inline void* xmalloc(size_t bytes) {
  void* p = calloc(1, bytes ? bytes : 1);
  if (p == NULL) exit(2);
  return p;
}

#endif /* BRAID_NCCL_CONFORMANCE_VALUES_H */
