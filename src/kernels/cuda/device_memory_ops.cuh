// The executor protocol's memory operations on the GPU (executor_protocol.h describes the set).
// Counters, flags and headers are accessed through volatile pointers, so each access reaches
// memory exactly once, and ordered by __threadfence_system(): the other end of a FIFO may be
// another GPU or a host thread reading mapped pinned memory, so device scope would not do.
#pragma once

#include <cstdint>

namespace braid::gpu {

struct DeviceMemoryOps {
  /// A counter or flag another agent writes.
  __device__ static uint64_t load(const uint64_t* p) {
    return *reinterpret_cast<const volatile uint64_t*>(p);
  }
  __device__ static uint32_t load(const uint32_t* p) {
    return *reinterpret_cast<const volatile uint32_t*>(p);
  }
  /// A counter or flag another agent reads.
  __device__ static void store(uint64_t* p, uint64_t v) {
    *reinterpret_cast<volatile uint64_t*>(p) = v;
  }
  __device__ static void store(uint32_t* p, uint32_t v) {
    *reinterpret_cast<volatile uint32_t*>(p) = v;
  }
  /// A word of a header or descriptor that a counter or flag publishes.
  __device__ static uint64_t readWord(const uint64_t* p) { return load(p); }
  __device__ static void writeWord(uint64_t* p, uint64_t v) { store(p, v); }
  /// A field of the control block that `error` publishes.
  template <class T>
  __device__ static void writeField(T* p, T v) {
    *reinterpret_cast<volatile T*>(p) = v;
  }
  /// A low-latency line (ll_protocol.h): data and flag in one 16-byte volatile access, which the
  /// GPU performs whole, so a reader that sees the flag sees the data beside it.
  template <class Line>
  __device__ static void storeLine(Line* l, uint64_t data, uint64_t flag) {
    asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(l), "l"(data), "l"(flag) : "memory");
  }
  template <class Line>
  __device__ static void loadLine(const Line* l, uint64_t& data, uint64_t& flag) {
    asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(data), "=l"(flag) : "l"(l) : "memory");
  }
  /// fenceRelease for a peer on the same GPU: device scope is enough.
  __device__ static void fenceReleaseGpu() { __threadfence(); }
  /// Orders the reads after it after the counter load before it.
  __device__ static void fenceAcquire() { __threadfence_system(); }
  /// Orders the writes before it before the counter store after it.
  __device__ static void fenceRelease() { __threadfence_system(); }
  /// Returns the old value.
  __device__ static uint32_t compareExchange(uint32_t* p, uint32_t expected, uint32_t desired) {
    return atomicCAS(p, expected, desired);
  }
  __device__ static uint64_t nowNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  /// One pause of a long wait.
  __device__ static void backoff() { __nanosleep(256); }
};

}  // namespace braid::gpu
