// A request to a peer that must be answered within a deadline: past it,
// `done` gets kUnavailable naming the peer and the method (a stopped
// process keeps its connection open, so the link's own timeout would make
// the caller wait far longer). Whichever comes first, the answer or the
// deadline, `done` is called once. Event loop only; what Peers::call_within
// does for PeerLink and for the simulation's peers alike.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}

namespace yonder::reach {

void call_with_deadline(boost::asio::io_context& io, link::LinkService& service, const Peers::Target& t,
                        const std::string& method, const nlohmann::json& params, std::chrono::milliseconds deadline,
                        std::function<void(Result<nlohmann::json>)> done);

}  // namespace yonder::reach
