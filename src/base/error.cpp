#include "base/error.h"

namespace yonder {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kFailedPrecondition: return "failed_precondition";
    case ErrorCode::kDataLoss: return "data_loss";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

ErrorCode error_code_from_name(std::string_view name, ErrorCode fallback) {
  for (ErrorCode c : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kAlreadyExists,
                      ErrorCode::kPermissionDenied, ErrorCode::kUnavailable, ErrorCode::kFailedPrecondition,
                      ErrorCode::kDataLoss, ErrorCode::kResourceExhausted, ErrorCode::kInternal}) {
    if (name == error_code_name(c)) return c;
  }
  return fallback;
}

}  // namespace yonder
