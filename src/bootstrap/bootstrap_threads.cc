#include "bootstrap/bootstrap_threads.h"

#include <thread>

namespace braid {

std::vector<Status> onBootstrapThreads(int n, double timeoutSeconds,
                                       const std::function<Status(int, Bootstrap&)>& body) {
  Result<braidUniqueId> id = startBootstrapRoot("lo", timeoutSeconds);
  if (!id.ok()) return std::vector<Status>(static_cast<size_t>(n), id.status());
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      WaitPolicy wait;
      wait.timeoutSeconds = timeoutSeconds;
      Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(id.value(), r, n, "lo", wait);
      out[size_t(r)] = b.ok() ? body(r, *b.value()) : b.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace braid
