// Fuzzes the relay offers peers send each other (`reach.relay_offer`,
// net/reach/relay_offer_core.h): whatever JSON arrives, an accepted offer
// is a withdrawal or a public IPv4 endpoint that is not this host's, and
// the offer body made from it reads back the same.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "net/reach/relay_offer_core.h"
#include "relay/path_hint.h"

using namespace yonder;
using namespace yonder::reach;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  const std::vector<std::string> own = {"127.0.0.1", "203.0.113.5"};
  auto offer = read_relay_offer(body, own);
  if (!offer.ok()) return 0;
  if (!offer->empty() && (!relay::is_public_ipv4_endpoint(*offer) || offer->rfind("203.0.113.5:", 0) == 0)) {
    __builtin_trap();
  }
  auto again = read_relay_offer(relay_offer_body(*offer), own);
  if (!again.ok() || *again != *offer) __builtin_trap();
  return 0;
}
