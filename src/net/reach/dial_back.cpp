#include "net/reach/dial_back.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "relay/path_hint.h"

namespace yonder::reach {

DialBackAnswer read_dial_back_answer(const std::string& helper, const std::vector<std::string>& asked,
                                     const Result<nlohmann::json>& answer) {
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
    if (std::find(asked.begin(), asked.end(), text) == asked.end()) continue;  // only what we asked about
    auto reached = one.find("reached");
    a.reached[text] = reached != one.end() && reached->is_boolean() && reached->get<bool>();
  }
  return a;
}

DialBack::DialBack(link::LinkService& link, Ask ask, std::function<std::vector<std::string>()> own_hosts)
    : link_(link), ask_(std::move(ask)), own_hosts_(std::move(own_hosts)) {}

DialBack::~DialBack() { *alive_ = false; }

void DialBack::register_method() {
  link_.add_method("reach.dial_back", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                             link::RpcReply reply) { serve(peer, params, std::move(reply)); });
}

void DialBack::serve(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
  // Untrusted: a bounded list of short strings, or a refusal.
  auto list = params.is_object() ? params.find("addresses") : params.end();
  if (!params.is_object() || list == params.end() || !list->is_array()) {
    return reply(make_error(ErrorCode::kInvalidArgument, "reach.dial_back takes {\"addresses\": [\"IP:PORT\", ...]}"));
  }
  if (auto st = gate_.admit(peer, list->size(), std::chrono::steady_clock::now()); !st) return reply(st.error());
  std::vector<std::string> addresses;
  for (const auto& a : *list) {
    if (!a.is_string() || a.get_ref<const std::string&>().size() > 64) {
      return reply(make_error(ErrorCode::kInvalidArgument, "reach.dial_back: each address is an \"IP:PORT\" string"));
    }
    addresses.push_back(a.get<std::string>());
  }
  struct Round {
    nlohmann::json results = nlohmann::json::array();
    size_t pending = 0;
    link::RpcReply reply;
  };
  auto round = std::make_shared<Round>();
  round->reply = std::move(reply);
  round->pending = addresses.size();
  auto finish_one = [round](nlohmann::json result) {
    round->results.push_back(std::move(result));
    if (--round->pending == 0) round->reply(nlohmann::json{{"results", std::move(round->results)}});
  };
  std::vector<std::string> own = own_hosts_ ? own_hosts_() : std::vector<std::string>{};
  for (const auto& address : addresses) {
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
}

void DialBack::check(std::vector<std::string> candidates, bool listening, std::vector<Helper> helpers,
                     std::function<void()> done) {
  if (candidates.empty() || helpers.empty()) {
    last_ = dial_back_verdict(candidates, listening, {});
    return done();
  }
  struct Round {
    std::vector<std::string> candidates;
    bool listening = false;
    std::vector<DialBackAnswer> answers;
    size_t pending = 0;
    std::function<void()> done;
  };
  auto round = std::make_shared<Round>();
  round->candidates = candidates;
  round->listening = listening;
  round->pending = helpers.size();
  round->done = std::move(done);
  nlohmann::json params = {{"addresses", candidates}};
  for (const auto& h : helpers) {
    ask_(h, params, [this, alive = std::weak_ptr<bool>(alive_), round, name = h.name](Result<nlohmann::json> r) {
      DialBackAnswer a = read_dial_back_answer(name, round->candidates, r);
      round->answers.push_back(std::move(a));
      if (--round->pending > 0) return;
      auto a_live = alive.lock();
      if (!a_live || !*a_live) return;
      last_ = dial_back_verdict(round->candidates, round->listening, round->answers);
      spdlog::info("reachability: {} ({})", reachability_state_name(last_->state), last_->why);
      round->done();
    });
  }
}

nlohmann::json DialBack::state() const {
  if (!last_) return {{"state", "unknown"}, {"why", "not checked yet: `yonder netcheck` asks peers to dial back"}};
  nlohmann::json j = {{"state", reachability_state_name(last_->state)},
                      {"why", last_->why},
                      {"tested", last_->tested},
                      {"confirmed_by", last_->confirmed_by},
                      {"failed_by", last_->failed_by}};
  if (!last_->address.empty()) j["address"] = last_->address;
  return j;
}

}  // namespace yonder::reach
