// The one error type of the code base, and the Result<T> that carries it.
//
// Failure policy (after Envoy): untrusted input and likely environment
// failures come back as an Error with a message the user can act on; broken
// invariants crash. Exceptions thrown by third-party code are caught at the
// edge that calls it and turned into an Error there.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace yonder {

enum class ErrorCode {
  kInvalidArgument,   // the caller (user, peer, file) gave something malformed
  kNotFound,          // a thing that should exist does not
  kAlreadyExists,     // refusing to replace something that exists
  kPermissionDenied,  // file modes, scopes, authorisation
  kUnavailable,       // a service (daemon, docker, driver) cannot be reached
  kFailedPrecondition,// state does not allow the operation now
  kDataLoss,          // stored bytes are corrupt or cannot be decrypted
  kResourceExhausted, // a size or rate bound was hit
  kInternal,          // a dependency failed in a way we did not expect
};

const char* error_code_name(ErrorCode code);
// The code a name from error_code_name stands for (as peers and the local
// API send it); `fallback` for a name this version does not know.
ErrorCode error_code_from_name(std::string_view name, ErrorCode fallback = ErrorCode::kFailedPrecondition);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  // What went wrong and what to do next, one or two sentences.
  const std::string& message() const { return message_; }
  // Where it happened ("reading /x/config.toml"), outermost first.
  const std::string& context() const { return context_; }

  // Adds an outer context: "opening the store: reading x: <message>".
  Error&& with_context(const std::string& outer) && {
    context_ = context_.empty() ? outer : outer + ": " + context_;
    return std::move(*this);
  }

  // "context: message", the form printed to users.
  std::string to_string() const {
    return context_.empty() ? message_ : context_ + ": " + message_;
  }

 private:
  ErrorCode code_;
  std::string message_;
  std::string context_;
};

// Result<T> holds a T or an Error (std::expected is C++23; this is the part
// of it we use). Reading value() of an error is a broken invariant: it aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    if (ok()) std::abort();
    return std::get<1>(v_);
  }
  Error&& error() && {
    if (ok()) std::abort();
    return std::get<1>(std::move(v_));
  }

 private:
  void check() const {
    if (!ok()) std::abort();
  }
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

inline Error make_error(ErrorCode code, std::string message) { return Error(code, std::move(message)); }

}  // namespace yonder

// Returns the error of `expr` (a Result) from the enclosing function.
#define YONDER_TRY(expr)                              \
  do {                                                \
    auto yonder_try_r_ = (expr);                      \
    if (!yonder_try_r_.ok()) return std::move(yonder_try_r_).error(); \
  } while (0)
