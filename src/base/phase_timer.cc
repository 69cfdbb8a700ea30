#include "base/phase_timer.h"

#include <time.h>

#include <cstdio>

namespace braid {
namespace {

double nowMs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

}  // namespace

PhaseTimer::PhaseTimer()
    : wallStart_(nowMs(CLOCK_MONOTONIC)), cpuStart_(nowMs(CLOCK_PROCESS_CPUTIME_ID)) {}

void PhaseTimer::end(std::string_view name) {
  const double wall = nowMs(CLOCK_MONOTONIC);
  const double cpu = nowMs(CLOCK_PROCESS_CPUTIME_ID);
  phases_.push_back(Phase{std::string(name), wall - wallStart_, cpu - cpuStart_});
  wallStart_ = wall;
  cpuStart_ = cpu;
}

std::string PhaseTimer::summary() const {
  double wall = 0, cpu = 0;
  for (const Phase& p : phases_) {
    wall += p.wallMs;
    cpu += p.cpuMs;
  }
  char text[96];
  std::snprintf(text, sizeof(text), "total %.1f ms (cpu %.1f)", wall, cpu);
  std::string out = text;
  for (size_t i = 0; i < phases_.size(); ++i) {
    std::snprintf(text, sizeof(text), " %.1f (%.1f)", phases_[i].wallMs, phases_[i].cpuMs);
    out += (i == 0 ? ": " : ", ") + phases_[i].name + text;
  }
  return out;
}

}  // namespace braid
