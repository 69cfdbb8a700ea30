#include "base/status.h"

#include <cstring>

namespace braid {

Status errnoError(const std::string& what, int errno_value) {
  return systemError(what + ": " + std::strerror(errno_value));
}

}  // namespace braid
