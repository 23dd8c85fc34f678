// Fuzzes the STUN codec (net/punch/stun.h) on both sides: the relay's
// responder (any datagram from anyone) and the node's decoder of responses.
// An answer is never more than 24 bytes longer than its request, and decodes
// back to the address it was made for.
#include <cstdint>

#include "net/punch/stun.h"

using namespace yonder;
using namespace yonder::punch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView in(data, size);
  StunTransactionId id{};
  if (size >= 20) std::copy(data + 8, data + 20, id.begin());
  (void)decode_binding_response(in, id);
  (void)looks_like_stun(in);
  udp::endpoint from(boost::asio::ip::make_address_v4("203.0.113.7"), 4242);
  if (auto answer = answer_binding_request(in, from)) {
    if (answer->size() > size + 24) __builtin_trap();
    auto back = decode_binding_response(*answer, id);
    if (!back.ok() || *back != from) __builtin_trap();
  }
  return 0;
}
