// Status and Result<T>: how every internal function reports failure. Nothing throws across the
// C ABI; api.cc turns a Status into a braidResult_t and remembers its message as the last error.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

#include "braid.h"

namespace braid {

/// An error code from the public enum plus a one-line human reason; ok() when code is success.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(braidResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == braidSuccess; }
  braidResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  /// The same error with `context: ` put in front of its message.
  Status withContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

 private:
  braidResult_t code_ = braidSuccess;
  std::string message_;
};

inline Status okStatus() { return Status(); }
inline Status invalidArgument(std::string m) { return {braidInvalidArgument, std::move(m)}; }
inline Status invalidUsage(std::string m) { return {braidInvalidUsage, std::move(m)}; }
inline Status systemError(std::string m) { return {braidSystemError, std::move(m)}; }
inline Status internalError(std::string m) { return {braidInternalError, std::move(m)}; }
inline Status remoteError(std::string m) { return {braidRemoteError, std::move(m)}; }
inline Status timeoutError(std::string m) { return {braidTimeout, std::move(m)}; }
/// A system error whose message ends with strerror(errno_value).
Status errnoError(const std::string& what, int errno_value);

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace braid

#define BRAID_CONCAT_INNER(a, b) a##b
#define BRAID_CONCAT(a, b) BRAID_CONCAT_INNER(a, b)

/// Returns the Status of `expr` from the enclosing function when it is an error.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::braid::Status braid_status_ = (expr);        \
    if (!braid_status_.ok()) return braid_status_; \
  } while (0)

/// `ASSIGN_OR_RETURN(auto x, f())`: binds the value of a Result or returns its Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(BRAID_CONCAT(braid_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
