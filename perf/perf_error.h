// How perf code reports failure. All it ever does with one is print it, with context added on the
// way up, so a failure is a message and nothing more; perf uses no header of the library's for it.
#pragma once

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace braid::perf {

/// Success, or the one-line reason a step failed.
class [[nodiscard]] Outcome {
 public:
  /// Success.
  Outcome() = default;

  bool ok() const { return !reason_.has_value(); }
  /// Why the step failed; empty on success.
  const std::string& message() const {
    static const std::string kNone;
    return reason_ ? *reason_ : kNone;
  }
  /// The same failure with "context: " in front of its message; success stays success.
  Outcome withContext(std::string_view context) const {
    return ok() ? *this : Outcome(std::string(context) + ": " + *reason_);
  }

  friend Outcome failure(std::string reason);

 private:
  explicit Outcome(std::string reason) : reason_(std::move(reason)) {}
  std::optional<std::string> reason_;
};

/// A failed Outcome saying `reason`.
inline Outcome failure(std::string reason) { return Outcome(std::move(reason)); }
/// A failed Outcome saying "what: " and the text of errno value `err`.
inline Outcome errnoFailure(const std::string& what, int err) {
  return failure(what + ": " + std::strerror(err));
}

/// A value, or the failed Outcome that stands in its place.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as a return value
  /// A failure. Handed a success by mistake, it still holds no value, so it reads as a failure.
  Expected(Outcome failed)  // NOLINT: implicit, as a return value
      : outcome_(failed.ok() ? failure("no value") : std::move(failed)) {}

  bool ok() const { return value_.has_value(); }
  /// Success, or why there is no value.
  const Outcome& outcome() const { return outcome_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Outcome outcome_;
};

}  // namespace braid::perf

#define PERF_JOIN_INNER(a, b) a##b
#define PERF_JOIN(a, b) PERF_JOIN_INNER(a, b)

/// Returns the Outcome of `expr` from the enclosing function when it is a failure.
#define PERF_TRY(expr)                             \
  do {                                             \
    ::braid::perf::Outcome perf_outcome_ = (expr); \
    if (!perf_outcome_.ok()) return perf_outcome_; \
  } while (0)

/// `PERF_ASSIGN(auto x, f())`: binds the value of an Expected, or returns its failure.
#define PERF_ASSIGN(lhs, expr) PERF_ASSIGN_INNER(PERF_JOIN(perf_expected_, __LINE__), lhs, expr)
#define PERF_ASSIGN_INNER(tmp, lhs, expr) \
  auto tmp = (expr);                      \
  if (!tmp.ok()) return tmp.outcome();    \
  lhs = std::move(tmp).value()
