// Marks for the functions that both compilers build: g++ for the host, nvcc for the host and the
// device.
//   BRAID_HOST_DEVICE   __host__ __device__ under nvcc; nothing elsewhere.
//   BRAID_FORCE_INLINE  inline, and outside nvcc always inlined (GCC's always_inline); nvcc
//                       keeps its own choice.
#pragma once

#ifdef __CUDACC__
#define BRAID_HOST_DEVICE __host__ __device__
#define BRAID_FORCE_INLINE inline
#else
#define BRAID_HOST_DEVICE
#define BRAID_FORCE_INLINE __attribute__((always_inline)) inline
#endif
