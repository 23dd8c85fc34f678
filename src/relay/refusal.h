// Why the relay said no: one reason code per kind of refusal. The code
// travels in the protocol's `error` message (so a node can react to it), is
// the label of the `yonder_relay_refusals_total` counter, and maps onto the
// code base's ErrorCode when a client turns a refusal into an Error.
//
// The relay's sans-I/O core (registry.h) returns Decision<T>: a T, or a
// Refusal with its reason and a message for people. A plain Result<T> would
// lose the reason, which the wire and the metrics both need.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/error.h"

namespace yonder::relay {

enum class Reason {
  kIdentityMismatch,     // a node tried to register a key other than its TLS certificate's
  kNotRegistered,        // a request before `register`
  kNotDeclared,          // the caller has not listed the target as a peer
  kPeerUnavailable,      // the target is not connected, or has not listed the caller
  kTooManyConnections,   // the relay's total connection cap
  kNodeConnectionLimit,  // this node's connection cap
  kTooManyPipes,         // the relay's pipe cap
  kPipePending,          // a pipe request to that peer is already waiting
  kPipeTimeout,          // the peer did not ask for the pipe (or connect its end) in time
  kBadTicket,            // an unknown, used or expired pipe ticket
  kRateLimited,          // the per-connection message budget is spent
  kTooLarge,             // a message or signal over its bound
  kBadMessage,           // not a message of this protocol
  kTooManyPeers,         // a peer list over the bound
  kIdleTimeout,          // nothing heard for the idle timeout
  kSlowReader,           // the node does not read what the relay sends it
  kShuttingDown,         // the relay is stopping
  kNotAllowed,           // this relay serves only some nodes (a yonderd relaying for its own peers)
  kMonthlyCapReached,    // the relay carried its monthly allowance (monthly_allowance.h)
};
constexpr int kReasonCount = static_cast<int>(Reason::kMonthlyCapReached) + 1;

// "identity_mismatch", "not_declared", ... (wire form and metric label).
const char* reason_name(Reason reason);
std::optional<Reason> parse_reason(std::string_view name);
ErrorCode reason_error_code(Reason reason);

struct Refusal {
  Reason reason;
  std::string message;  // what happened and what to do next
  // "relay refused (not_declared): <message>" as the code base's Error.
  Error to_error() const;
};

template <typename T>
using Decision = std::variant<T, Refusal>;

template <typename T>
const Refusal* refusal_of(const Decision<T>& d) {
  return std::get_if<Refusal>(&d);
}

}  // namespace yonder::relay
