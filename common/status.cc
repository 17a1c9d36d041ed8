#include "weft/common/status.h"

#include <cstring>

#include <fmt/format.h>

namespace weft {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kIo: return "i/o error";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return fmt::format("{}: {}", status_code_name(code_), message_);
}

Status invalid_argument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
Status failed_precondition(std::string msg) {
  return {StatusCode::kFailedPrecondition, std::move(msg)};
}
Status internal_error(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
Status data_loss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
Status unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
Status deadline_exceeded(std::string msg) {
  return {StatusCode::kDeadlineExceeded, std::move(msg)};
}
Status aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
Status out_of_range(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }
Status unimplemented(std::string msg) { return {StatusCode::kUnimplemented, std::move(msg)}; }
Status permission_denied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
Status io_error(std::string_view what, int err) {
  return {StatusCode::kIo, fmt::format("{}: {}", what, std::strerror(err))};
}

}  // namespace weft
