// Status and Result<T>: how errors cross every weft module boundary.
//
// Exceptions never cross a module API; a failing
// call returns a Status with a code and a one-line message, and callers add
// context as it propagates:
//
//   weft::Result<Fabric> f = load_fabric(path);
//   if (!f) return f.status().with_context("loading " + path);
//   use(*f);
//
//   WEFT_ASSIGN_OR_RETURN(auto fabric, load_fabric(path));
//   WEFT_RETURN_IF_ERROR(validate(fabric));
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace weft {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad file, bad flag)
  kNotFound,         // a named thing does not exist
  kAlreadyExists,
  kFailedPrecondition,  // valid input, but the state forbids it
  kOutOfRange,
  kUnavailable,  // a peer or resource cannot be reached now
  kDeadlineExceeded,
  kAborted,
  kDataLoss,   // corrupt input (a file, a packet)
  kInternal,   // a bug in weft
  kUnimplemented,
  kPermissionDenied,
  kIo,  // an OS call failed; message carries strerror
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message" — context reads outermost first, like a stack.
  Status with_context(std::string_view context) const;
  // "code: message", for logs.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// The OK status. A free function, not a static member of Status: a static
// member is callable through an instance, so `s.ok()` would compile and
// always be OK.
inline Status ok_status() { return {}; }

Status invalid_argument(std::string msg);
Status not_found(std::string msg);
Status failed_precondition(std::string msg);
Status internal_error(std::string msg);
Status data_loss(std::string msg);
Status unavailable(std::string msg);
Status deadline_exceeded(std::string msg);
Status aborted(std::string msg);
Status out_of_range(std::string msg);
Status unimplemented(std::string msg);
Status permission_denied(std::string msg);
// An errno-carrying failure: "what: strerror(err)".
Status io_error(std::string_view what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).is_ok() && "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline Status as_status(const Status& s) { return s; }
template <typename T>
Status as_status(const Result<T>& r) { return r.status(); }
}  // namespace internal

}  // namespace weft

#define WEFT_CONCAT_INNER(a, b) a##b
#define WEFT_CONCAT(a, b) WEFT_CONCAT_INNER(a, b)

#define WEFT_RETURN_IF_ERROR(expr)                                   \
  do {                                                               \
    ::weft::Status weft_status_ = ::weft::internal::as_status(expr); \
    if (!weft_status_.is_ok()) return weft_status_;                  \
  } while (0)

#define WEFT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()

// Expands to several statements: inside an if, use braces.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL(WEFT_CONCAT(weft_result_, __LINE__), lhs, expr)
