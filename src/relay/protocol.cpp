#include "relay/protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

namespace yonder::relay {
namespace {

using nlohmann::json;

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "bad relay message: " + what);
}

std::string node_text(const PublicKeyBytes& k) {
  return NodeId(k).to_string();
}

json node_list(const std::vector<PublicKeyBytes>& keys) {
  json a = json::array();
  for (const auto& k : keys) a.push_back(node_text(k));
  return a;
}

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

Result<std::string> string_field(const json& j, const char* key, size_t max) {
  const json* f = field(j, key);
  if (f == nullptr || !f->is_string()) return bad(std::string("\"") + key + "\" must be a string");
  const auto& s = f->get_ref<const std::string&>();
  if (s.size() > max) return bad(std::string("\"") + key + "\" is too long");
  return s;
}

Result<uint64_t> id_field(const json& j) {
  const json* f = field(j, "id");
  // Parsed JSON holds non-negative integers as unsigned; built JSON may not.
  if (f == nullptr || !f->is_number_integer() || (!f->is_number_unsigned() && f->get<int64_t>() < 0)) {
    return bad("\"id\" must be an unsigned integer");
  }
  return f->get<uint64_t>();
}

Result<PublicKeyBytes> node_field(const json& j, const char* key) {
  auto s = string_field(j, key, NodeId::kMaxInputLength);
  if (!s) return std::move(s).error();
  auto id = NodeId::parse(*s);
  if (!id) return bad(std::string("\"") + key + "\": " + id.error().message());
  return id->public_key();
}

Result<std::vector<PublicKeyBytes>> node_list_field(const json& j, const char* key) {
  const json* f = field(j, key);
  if (f == nullptr) return std::vector<PublicKeyBytes>{};
  if (!f->is_array()) return bad(std::string("\"") + key + "\" must be an array of node ids");
  if (f->size() > kMaxPeers) {
    return Error(ErrorCode::kResourceExhausted, "a peer list holds at most " + std::to_string(kMaxPeers) + " node ids");
  }
  std::vector<PublicKeyBytes> out;
  out.reserve(f->size());
  for (const auto& item : *f) {
    if (!item.is_string() || item.get_ref<const std::string&>().size() > NodeId::kMaxInputLength) {
      return bad(std::string("\"") + key + "\" must hold node ids");
    }
    auto id = NodeId::parse(item.get_ref<const std::string&>());
    if (!id) return bad(std::string("\"") + key + "\": " + id.error().message());
    out.push_back(id->public_key());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string token_text(const Rendezvous& t) { return hex_encode(t); }

// 64 lower-case hex digits (tickets, rendezvous tokens).
std::optional<std::array<uint8_t, 32>> hex32(std::string_view text) {
  if (text.size() != 64) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

Result<Rendezvous> token_from(const json& item) {
  if (!item.is_string()) return bad("a rendezvous token is 64 lower-case hex digits");
  auto t = hex32(item.get_ref<const std::string&>());
  if (!t) return bad("a rendezvous token is 64 lower-case hex digits");
  return *t;
}

Result<std::vector<Rendezvous>> token_list_field(const json& j) {
  const json* f = field(j, "rendezvous");
  if (f == nullptr) return std::vector<Rendezvous>{};
  if (!f->is_array()) return bad("\"rendezvous\" must be an array of tokens");
  if (f->size() > kMaxRendezvous) {
    return Error(ErrorCode::kResourceExhausted,
                 "a node registers at most " + std::to_string(kMaxRendezvous) + " rendezvous tokens");
  }
  std::vector<Rendezvous> out;
  for (const auto& item : *f) {
    auto t = token_from(item);
    if (!t) return std::move(t).error();
    out.push_back(*t);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::optional<Rendezvous>> token_field(const json& j) {
  const json* f = field(j, "rendezvous");
  if (f == nullptr) return std::optional<Rendezvous>{};
  auto t = token_from(*f);
  if (!t) return std::move(t).error();
  return std::optional<Rendezvous>(*t);
}

json token_list(const std::vector<Rendezvous>& tokens) {
  json a = json::array();
  for (const auto& t : tokens) a.push_back(token_text(t));
  return a;
}

Result<Bytes> data_field(const json& j) {
  // base64 of kMaxSignalBytes is 4 * ceil(n / 3) characters.
  auto s = string_field(j, "data", 4 * ((kMaxSignalBytes + 2) / 3));
  if (!s) {
    if (field(j, "data") != nullptr && field(j, "data")->is_string()) {
      return Error(ErrorCode::kResourceExhausted, "signal data is over " + std::to_string(kMaxSignalBytes) +
                                                      " bytes; send less (signals are for "
                                                      "small messages; open a pipe for bulk bytes)");
    }
    return std::move(s).error();
  }
  auto b = base64_decode(*s);
  if (!b) return bad("\"data\" is not base64");
  if (b->size() > kMaxSignalBytes) return Error(ErrorCode::kResourceExhausted, "signal data is too large");
  return std::move(*b);
}

Result<bool> bool_field(const json& j, const char* key, bool fallback) {
  const json* f = field(j, key);
  if (f == nullptr) return fallback;
  if (!f->is_boolean()) return bad(std::string("\"") + key + "\" must be true or false");
  return f->get<bool>();
}

Result<uint64_t> uint_field(const json& j, const char* key, uint64_t fallback) {
  const json* f = field(j, key);
  if (f == nullptr) return fallback;
  if (!f->is_number_integer() || (!f->is_number_unsigned() && f->get<int64_t>() < 0)) {
    return bad(std::string("\"") + key + "\" must be an unsigned integer");
  }
  return f->get<uint64_t>();
}

json nat_json(const NatReport& n) {
  return {{"observed_addr", n.observed.to_string()},
          {"mapping", mapping_name(n.mapping)},
          {"nat", verdict_name(n.nat)},
          {"samples", n.samples}};
}

Result<NatReport> nat_from(const json& j) {
  NatReport n;
  auto addr = string_field(j, "observed_addr", kMaxAddressText);
  if (!addr) return std::move(addr).error();
  auto a = parse_net_address(*addr);
  if (!a) return bad("\"observed_addr\": " + a.error().message());
  n.observed = *a;
  auto m = string_field(j, "mapping", 32);
  auto v = string_field(j, "nat", 32);
  if (!m || !v) return bad("\"mapping\" and \"nat\" must be strings");
  // Unknown words from a newer relay read as unknown, not as an error.
  n.mapping = parse_mapping(*m).value_or(Mapping::kUnknown);
  n.nat = parse_verdict(*v).value_or(NatVerdict::kUnknown);
  auto s = uint_field(j, "samples", 0);
  if (!s) return std::move(s).error();
  n.samples = static_cast<uint32_t>(std::min<uint64_t>(*s, UINT32_MAX));
  return n;
}

// Unwraps a Result into `var` or returns its error from the enclosing function.
#define RELAY_GET(var, expr)                       \
  auto var##_r = (expr);                           \
  if (!var##_r) return std::move(var##_r).error(); \
  auto var = std::move(*var##_r)

}  // namespace

json to_json(const ClientMessage& m) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Register>) {
          json j = {{"type", "register"},
                    {"v", kProtocolVersion},
                    {"node", node_text(v.node)},
                    {"peers", node_list(v.peers)}};
          if (v.local_addr) j["local_addr"] = v.local_addr->to_string();
          if (!v.rendezvous.empty()) j["rendezvous"] = token_list(v.rendezvous);
          if (v.probe) j["probe"] = true;
          return j;
        } else if constexpr (std::is_same_v<T, SetPeers>) {
          json j = {{"type", "peers"}, {"id", v.id}, {"peers", node_list(v.peers)}};
          if (!v.rendezvous.empty()) j["rendezvous"] = token_list(v.rendezvous);
          return j;
        } else if constexpr (std::is_same_v<T, SendSignal>) {
          return {{"type", "signal"}, {"id", v.id}, {"to", node_text(v.to)}, {"data", base64_encode(v.data)}};
        } else if constexpr (std::is_same_v<T, RequestPipe>) {
          json j = {{"type", "pipe"}, {"id", v.id}, {"to", node_text(v.to)}};
          if (v.rendezvous) j["rendezvous"] = token_text(*v.rendezvous);
          return j;
        } else {
          return {{"type", "ping"}, {"id", v.id}};
        }
      },
      m);
}

json to_json(const RelayMessage& m) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Registered>) {
          json j = nat_json(v.nat);
          j["type"] = "registered";
          j["v"] = kProtocolVersion;
          j["node"] = node_text(v.node);
          j["node_rate"] = v.node_rate;
          j["max_signal_bytes"] = v.max_signal_bytes;
          j["idle_timeout_ms"] = v.idle_timeout_ms;
          return j;
        } else if constexpr (std::is_same_v<T, NatUpdate>) {
          json j = nat_json(v.nat);
          j["type"] = "nat";
          return j;
        } else if constexpr (std::is_same_v<T, Ack>) {
          return {{"type", "ok"}, {"id", v.id}};
        } else if constexpr (std::is_same_v<T, ErrorReply>) {
          json j = {
              {"type", "error"}, {"code", reason_name(v.reason)}, {"message", v.message.substr(0, kMaxErrorText)}};
          if (v.id) j["id"] = *v.id;
          return j;
        } else if constexpr (std::is_same_v<T, IncomingSignal>) {
          json j = {{"type", "signal"}, {"from", node_text(v.from)}, {"data", base64_encode(v.data)}};
          if (!v.from_host.empty()) j["from_host"] = v.from_host;
          return j;
        } else if constexpr (std::is_same_v<T, PipeWanted>) {
          json j = {{"type", "pipe_wanted"}, {"from", node_text(v.from)}};
          if (v.rendezvous) j["rendezvous"] = token_text(*v.rendezvous);
          return j;
        } else if constexpr (std::is_same_v<T, PipeReady>) {
          return {{"type", "pipe_ready"},      {"id", v.id},
                  {"peer", node_text(v.peer)}, {"ticket", hex_encode(v.ticket)},
                  {"initiator", v.initiator},  {"expires_ms", v.expires_ms}};
        } else {
          return {{"type", "pong"}, {"id", v.id}};
        }
      },
      m);
}

Result<ClientMessage> decode_client_message(const json& j) {
  if (!j.is_object()) return bad("not a JSON object");
  RELAY_GET(type, string_field(j, "type", 32));
  if (type == "register") {
    Register r;
    RELAY_GET(node, node_field(j, "node"));
    RELAY_GET(peers, node_list_field(j, "peers"));
    RELAY_GET(tokens, token_list_field(j));
    r.node = node;
    r.peers = std::move(peers);
    r.rendezvous = std::move(tokens);
    if (const json* la = field(j, "local_addr")) {
      if (!la->is_string() || la->get_ref<const std::string&>().size() > kMaxAddressText) {
        return bad("\"local_addr\" must be IP:PORT");
      }
      RELAY_GET(addr, parse_net_address(la->get_ref<const std::string&>()));
      r.local_addr = addr;
    }
    RELAY_GET(probe, bool_field(j, "probe", false));
    r.probe = probe;
    return ClientMessage(std::move(r));
  }
  RELAY_GET(id, id_field(j));
  if (type == "peers") {
    RELAY_GET(peers, node_list_field(j, "peers"));
    RELAY_GET(tokens, token_list_field(j));
    return ClientMessage(SetPeers{id, std::move(peers), std::move(tokens)});
  }
  if (type == "signal") {
    RELAY_GET(to, node_field(j, "to"));
    RELAY_GET(data, data_field(j));
    return ClientMessage(SendSignal{id, to, std::move(data)});
  }
  if (type == "pipe") {
    RELAY_GET(to, node_field(j, "to"));
    RELAY_GET(token, token_field(j));
    return ClientMessage(RequestPipe{id, to, token});
  }
  if (type == "ping") return ClientMessage(Ping{id});
  return bad("unknown type \"" + type + "\"");
}

Result<RelayMessage> decode_relay_message(const json& j) {
  if (!j.is_object()) return bad("not a JSON object");
  RELAY_GET(type, string_field(j, "type", 32));
  if (type == "registered") {
    Registered r;
    RELAY_GET(node, node_field(j, "node"));
    RELAY_GET(nat, nat_from(j));
    RELAY_GET(rate, uint_field(j, "node_rate", 0));
    RELAY_GET(max_signal, uint_field(j, "max_signal_bytes", kMaxSignalBytes));
    RELAY_GET(idle, uint_field(j, "idle_timeout_ms", 0));
    r.node = node;
    r.nat = nat;
    r.node_rate = rate;
    r.max_signal_bytes = static_cast<uint32_t>(std::min<uint64_t>(max_signal, kMaxSignalBytes));
    r.idle_timeout_ms = static_cast<uint32_t>(std::min<uint64_t>(idle, UINT32_MAX));
    return RelayMessage(r);
  }
  if (type == "nat") {
    RELAY_GET(nat, nat_from(j));
    return RelayMessage(NatUpdate{nat});
  }
  if (type == "error") {
    ErrorReply e;
    RELAY_GET(code, string_field(j, "code", 64));
    RELAY_GET(message, string_field(j, "message", kMaxErrorText));
    // A reason this client does not know still refuses: read it as bad_message
    // but keep the relay's words.
    e.reason = parse_reason(code).value_or(Reason::kBadMessage);
    e.message = message;
    if (field(j, "id") != nullptr) {
      RELAY_GET(id, id_field(j));
      e.id = id;
    }
    return RelayMessage(std::move(e));
  }
  if (type == "signal") {
    RELAY_GET(from, node_field(j, "from"));
    RELAY_GET(data, data_field(j));
    IncomingSignal s{from, std::move(data), {}};
    if (const json* h = field(j, "from_host")) {
      // An IP in text form and nothing else: it is compared, never dialled.
      in6_addr any{};
      if (!h->is_string() || h->get_ref<const std::string&>().size() > 45 ||
          (::inet_pton(AF_INET, h->get_ref<const std::string&>().c_str(), &any) != 1 &&
           ::inet_pton(AF_INET6, h->get_ref<const std::string&>().c_str(), &any) != 1)) {
        return make_error(ErrorCode::kInvalidArgument, "relay message: \"from_host\" must be an IP address");
      }
      s.from_host = h->get<std::string>();
    }
    return RelayMessage(std::move(s));
  }
  if (type == "pipe_wanted") {
    RELAY_GET(from, node_field(j, "from"));
    RELAY_GET(token, token_field(j));
    return RelayMessage(PipeWanted{from, token});
  }
  RELAY_GET(id, id_field(j));
  if (type == "ok") return RelayMessage(Ack{id});
  if (type == "pong") return RelayMessage(Pong{id});
  if (type == "pipe_ready") {
    PipeReady p;
    p.id = id;
    RELAY_GET(peer, node_field(j, "peer"));
    RELAY_GET(ticket_text, string_field(j, "ticket", 64));
    RELAY_GET(initiator, bool_field(j, "initiator", false));
    RELAY_GET(expires, uint_field(j, "expires_ms", 0));
    auto ticket = hex32(ticket_text);
    if (!ticket) return bad("\"ticket\" must be 64 lower-case hex digits");
    p.ticket = *ticket;
    p.peer = peer;
    p.initiator = initiator;
    p.expires_ms = static_cast<uint32_t>(std::min<uint64_t>(expires, UINT32_MAX));
    return RelayMessage(p);
  }
  return bad("unknown type \"" + type + "\"");
}

Result<std::optional<json>> ControlReader::next() {
  if (failed_) return *failed_;
  size_t before = reader_.buffered();
  auto r = reader_.next();
  if (!r) {
    failed_ = std::move(r).error();
    return *failed_;
  }
  size_t limit = 4 + max_;
  if (*r ? before - reader_.buffered() > limit : reader_.buffered() > limit) {
    failed_ =
        make_error(ErrorCode::kResourceExhausted, "relay control message over " + std::to_string(max_) + " bytes");
    return *failed_;
  }
  return std::move(*r);
}

Bytes encode_pipe_preface(const Ticket& ticket) {
  Bytes out(kPipeMagic.begin(), kPipeMagic.end());
  out.insert(out.end(), ticket.begin(), ticket.end());
  return out;
}

Result<Ticket> decode_pipe_preface(ByteView bytes) {
  if (bytes.size() != kPipePrefaceBytes || !std::equal(kPipeMagic.begin(), kPipeMagic.end(), bytes.begin())) {
    return make_error(ErrorCode::kInvalidArgument, "not a relay pipe preface");
  }
  Ticket t{};
  std::copy(bytes.begin() + 4, bytes.end(), t.begin());
  return t;
}

Status pipe_status_to_status(uint8_t status) {
  switch (static_cast<PipeStatus>(status)) {
    case PipeStatus::kJoined: return ok_status();
    case PipeStatus::kBadTicket:
      return make_error(ErrorCode::kPermissionDenied,
                        "the relay did not accept the pipe ticket (used, expired or unknown); ask for a new pipe");
    case PipeStatus::kPeerAbsent:
      return make_error(ErrorCode::kUnavailable,
                        "the peer did not connect its end of the relay pipe in time; try again");
    case PipeStatus::kRefused:
      return make_error(ErrorCode::kResourceExhausted,
                        "the relay refused the pipe end (a connection limit, or it is shutting down); try again later");
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "the relay answered the pipe preface with an unknown status " + std::to_string(status));
}

}  // namespace yonder::relay
