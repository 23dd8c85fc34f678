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

}  // namespace yonder
