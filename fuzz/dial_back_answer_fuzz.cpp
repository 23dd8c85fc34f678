// Fuzzes a helper's answer to `reach.dial_back` (net/reach/dial_back.h),
// which a paired peer may fill with anything: reading it never throws, an
// address counts only for the transport it was asked about, and the
// verdicts made from it name only addresses that were asked about and
// helpers that answered.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/reach/dial_back.h"

using namespace yonder;
using namespace yonder::reach;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  const std::vector<std::string> tcp = {"198.51.100.7:7850", "203.0.113.2:40000"};
  const std::vector<std::string> udp = {"198.51.100.7:7850", "203.0.113.2:40001"};
  DialBackAnswer a = read_dial_back_answer("ben", tcp, body, udp);
  auto within = [](const std::map<std::string, bool>& got, const std::vector<std::string>& asked) {
    return std::all_of(got.begin(), got.end(),
                       [&](const auto& kv) { return std::find(asked.begin(), asked.end(), kv.first) != asked.end(); });
  };
  if (!within(a.reached, tcp) || !within(a.reached_udp, udp)) __builtin_trap();
  if (a.tested_udp != !a.reached_udp.empty()) __builtin_trap();
  if (a.error && (!a.reached.empty() || a.tested_udp)) __builtin_trap();
  for (Transport t : {Transport::kTcp, Transport::kUdp}) {
    const auto& asked = t == Transport::kUdp ? udp : tcp;
    Reachability r = dial_back_verdict(asked, true, {a}, t);
    bool asked_about = std::find(asked.begin(), asked.end(), r.address) != asked.end();
    if (r.state == Reachability::State::kReachable &&
        (!asked_about || r.confirmed_by != std::vector<std::string>{"ben"})) {
      __builtin_trap();
    }
    if (r.why.empty()) __builtin_trap();
  }
  return 0;
}
