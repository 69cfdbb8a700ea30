// The model constants the tuner's tests build their cost models from: a 2-core host, one thread
// copying at 15 GB/s in cache.
#pragma once

#include "tuner/cost_model.h"

namespace braid {

/// A 2-core host's constants, FIFO hand-offs of `hopUs` between ranks on cores of their own.
inline ModelConstants tunerTestConstants(double hopUs = 0.3) {
  ModelConstants m;
  Calibration& c = m.calibration;
  c.stepUs = 0.02;
  c.hopUs = hopUs;
  c.crowdedHopUs = 4.0;
  c.copyCacheGBps = 15;
  c.copyDramGBps = 9;
  c.reduceCacheGBps = 12;
  c.reduceDramGBps = 8;
  c.transferGBps = 25;
  c.cacheMiB = 32;
  c.cpus = 2;
  m.host.cores = 2;
  m.host.llcBytes = 32ull << 20;
  return m;
}

}  // namespace braid
