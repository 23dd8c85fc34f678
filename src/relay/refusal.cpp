#include "relay/refusal.h"

#include <array>

namespace yonder::relay {
namespace {

constexpr std::array<const char*, kReasonCount> kNames = {
    "identity_mismatch",     "not_registered", "not_declared", "peer_unavailable", "too_many_connections",
    "node_connection_limit", "too_many_pipes", "pipe_pending", "pipe_timeout",     "bad_ticket",
    "rate_limited",          "too_large",      "bad_message",  "too_many_peers",   "idle_timeout",
    "slow_reader",           "shutting_down",           "not_allowed",      "monthly_cap_reached",
};

}  // namespace

const char* reason_name(Reason reason) {
  return kNames[static_cast<size_t>(reason)];
}

std::optional<Reason> parse_reason(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<Reason>(i);
  }
  return std::nullopt;
}

ErrorCode reason_error_code(Reason reason) {
  switch (reason) {
    case Reason::kIdentityMismatch:
    case Reason::kBadTicket: return ErrorCode::kPermissionDenied;
    case Reason::kNotRegistered:
    case Reason::kNotDeclared: return ErrorCode::kFailedPrecondition;
    case Reason::kPeerUnavailable:
    case Reason::kPipeTimeout:
    case Reason::kIdleTimeout:
    case Reason::kShuttingDown: return ErrorCode::kUnavailable;
    case Reason::kNotAllowed: return ErrorCode::kPermissionDenied;
    case Reason::kPipePending: return ErrorCode::kAlreadyExists;
    case Reason::kBadMessage: return ErrorCode::kInvalidArgument;
    case Reason::kTooManyConnections:
    case Reason::kNodeConnectionLimit:
    case Reason::kTooManyPipes:
    case Reason::kRateLimited:
    case Reason::kTooLarge:
    case Reason::kTooManyPeers:
    case Reason::kSlowReader:
    case Reason::kMonthlyCapReached: return ErrorCode::kResourceExhausted;
  }
  return ErrorCode::kInternal;
}

Error Refusal::to_error() const {
  return Error(reason_error_code(reason), message)
      .with_context(std::string("relay refused (") + reason_name(reason) + ")");
}

}  // namespace yonder::relay
