// Marks for the functions that both compilers build: g++ for the host, nvcc for the host and the
// device.
//   BRAID_HOST_DEVICE   __host__ __device__ under nvcc; nothing elsewhere.
#pragma once

#ifdef __CUDACC__
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif
