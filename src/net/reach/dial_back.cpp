#include "net/reach/dial_back.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "relay/path_hint.h"

namespace yonder::reach {

DialBackAnswer read_dial_back_answer(const std::string& helper, const std::vector<std::string>& asked,
                                     const Result<nlohmann::json>& answer,
                                     const std::vector<std::string>& asked_udp) {
  DialBackAnswer a;
  a.helper = helper;
  if (!answer) {
    a.error = answer.error().message().substr(0, 200);
    return a;
  }
  auto results = answer->is_object() ? answer->find("results") : answer->end();
  if (results == answer->end() || !results->is_array()) {
    a.error = "an answer without results";
    return a;
  }
  for (const auto& one : *results) {
    if (!one.is_object()) continue;
    auto address = one.find("address");
    if (address == one.end() || !address->is_string()) continue;
    const auto& text = address->get_ref<const std::string&>();
    auto transport = one.find("transport");
    bool udp = transport != one.end() && transport->is_string() && transport->get_ref<const std::string&>() == "udp";
    const auto& list = udp ? asked_udp : asked;
    if (std::find(list.begin(), list.end(), text) == list.end()) continue;  // only what we asked about
    auto reached = one.find("reached");
    (udp ? a.reached_udp : a.reached)[text] = reached != one.end() && reached->is_boolean() && reached->get<bool>();
    if (udp) a.tested_udp = true;
  }
  return a;
}

DialBack::DialBack(link::LinkService& link, Ask ask, std::function<std::vector<std::string>()> own_hosts)
    : link_(link), ask_(std::move(ask)), own_hosts_(std::move(own_hosts)) {}

DialBack::~DialBack() { *alive_ = false; }

void DialBack::register_method(ProbeUdp probe_udp) {
  probe_udp_ = std::move(probe_udp);
  link_.add_method("reach.dial_back", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                             link::RpcReply reply) { serve(peer, params, std::move(reply)); });
}

namespace {
// A request's list of addresses: each an "IP:PORT" string of bounded size.
Result<std::vector<std::string>> read_addresses(const nlohmann::json& list) {
  std::vector<std::string> out;
  for (const auto& a : list) {
    if (!a.is_string() || a.get_ref<const std::string&>().size() > 64) {
      return make_error(ErrorCode::kInvalidArgument, "reach.dial_back: each address is an \"IP:PORT\" string");
    }
    out.push_back(a.get<std::string>());
  }
  return out;
}
}  // namespace

void DialBack::serve(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
  // Untrusted: bounded lists of short strings, or a refusal.
  auto list = params.is_object() ? params.find("addresses") : params.end();
  if (!params.is_object() || list == params.end() || !list->is_array()) {
    return reply(make_error(ErrorCode::kInvalidArgument,
                            "reach.dial_back takes {\"addresses\": [\"IP:PORT\", ...], \"udp\": [\"IP:PORT\", ...]}"));
  }
  auto udp_list = params.find("udp");
  if (udp_list != params.end() && !udp_list->is_array()) {
    return reply(make_error(ErrorCode::kInvalidArgument, "reach.dial_back: \"udp\" is a list of \"IP:PORT\" strings"));
  }
  size_t udp_count = udp_list == params.end() ? 0 : udp_list->size();
  if (auto st = gate_.admit(peer, list->size(), std::chrono::steady_clock::now(), udp_count); !st) {
    return reply(st.error());
  }
  auto addresses = read_addresses(*list);
  if (!addresses) return reply(addresses.error());
  Result<std::vector<std::string>> udp_addresses = std::vector<std::string>{};
  // Without a UDP socket of our own we answer for TCP only: the asker
  // counts that as not tested, not as unreachable.
  if (udp_count > 0 && probe_udp_) udp_addresses = read_addresses(*udp_list);
  if (!udp_addresses) return reply(udp_addresses.error());
  struct Answer {
    nlohmann::json results = nlohmann::json::array();
    size_t pending = 0;
    link::RpcReply reply;
  };
  auto round = std::make_shared<Answer>();
  round->reply = std::move(reply);
  round->pending = addresses->size() + udp_addresses->size();
  if (round->pending == 0) return round->reply(nlohmann::json{{"results", nlohmann::json::array()}});
  // One address done; a null result (a UDP address we could not dial: no
  // socket) is left out, so the asker counts UDP as not tested.
  auto finish_one = [round](nlohmann::json result) {
    if (!result.is_null()) round->results.push_back(std::move(result));
    if (--round->pending == 0) round->reply(nlohmann::json{{"results", std::move(round->results)}});
  };
  std::vector<std::string> own = own_hosts_ ? own_hosts_() : std::vector<std::string>{};
  for (const auto& address : *addresses) {
    if (auto st = relay::check_dial_back_target(address, own); !st) {
      finish_one({{"address", address}, {"reached", false}, {"refused", st.error().message()}});
      continue;
    }
    link_.probe(peer, address, kDialWithin, [address, finish_one](Status st) {
      // Why a dial failed stays here: the peer hears only that it did.
      if (!st) spdlog::debug("dial-back to {}: {}", address, st.error().message());
      finish_one({{"address", address}, {"reached", st.ok()}});
    });
  }
  for (const auto& address : *udp_addresses) {
    if (auto st = relay::check_dial_back_target(address, own); !st) {
      finish_one({{"address", address}, {"transport", "udp"}, {"reached", false}, {"refused", st.error().message()}});
      continue;
    }
    probe_udp_(peer, address, kDialWithin, [address, finish_one](Status st) {
      if (!st) spdlog::debug("dial-back over UDP to {}: {}", address, st.error().message());
      if (!st && st.error().code() == ErrorCode::kFailedPrecondition) return finish_one(nullptr);
      finish_one({{"address", address}, {"transport", "udp"}, {"reached", st.ok()}});
    });
  }
}

void DialBack::check(Round what, std::vector<Helper> helpers, std::function<void()> done) {
  if ((what.candidates.empty() && what.udp_candidates.empty()) || helpers.empty()) {
    last_ = dial_back_verdict(what.candidates, what.listening, {}, Transport::kTcp);
    last_udp_ = dial_back_verdict(what.udp_candidates, what.udp_socket, {}, Transport::kUdp);
    return done();
  }
  struct Asking {
    Round what;
    std::vector<DialBackAnswer> answers;
    size_t pending = 0;
    std::function<void()> done;
  };
  auto round = std::make_shared<Asking>();
  round->what = std::move(what);
  round->pending = helpers.size();
  round->done = std::move(done);
  nlohmann::json params = {{"addresses", round->what.candidates}};
  if (!round->what.udp_candidates.empty()) params["udp"] = round->what.udp_candidates;
  for (const auto& h : helpers) {
    ask_(h, params, [this, alive = std::weak_ptr<bool>(alive_), round, name = h.name](Result<nlohmann::json> r) {
      const Round& w = round->what;
      round->answers.push_back(read_dial_back_answer(name, w.candidates, r, w.udp_candidates));
      if (--round->pending > 0) return;
      auto a_live = alive.lock();
      if (!a_live || !*a_live) return;
      last_ = dial_back_verdict(w.candidates, w.listening, round->answers, Transport::kTcp);
      last_udp_ = dial_back_verdict(w.udp_candidates, w.udp_socket, round->answers, Transport::kUdp);
      spdlog::info("reachability: {} ({}); over UDP {} ({})", reachability_state_name(last_->state), last_->why,
                   reachability_state_name(last_udp_->state), last_udp_->why);
      round->done();
    });
  }
}

namespace {
nlohmann::json verdict_json(const Reachability& r) {
  nlohmann::json j = {{"state", reachability_state_name(r.state)},
                      {"why", r.why},
                      {"tested", r.tested},
                      {"confirmed_by", r.confirmed_by},
                      {"failed_by", r.failed_by}};
  if (!r.address.empty()) j["address"] = r.address;
  return j;
}
}  // namespace

nlohmann::json DialBack::state() const {
  if (!last_) return {{"state", "unknown"}, {"why", "not checked yet: `yonder netcheck` asks peers to dial back"}};
  nlohmann::json j = verdict_json(*last_);
  if (last_udp_) j["udp"] = verdict_json(*last_udp_);
  return j;
}

}  // namespace yonder::reach
