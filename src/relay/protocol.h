// The relay's wire protocol. Two kinds of TCP connection reach one port; the
// first byte tells them apart (a TLS record starts with 0x16, a pipe preface
// with 'Y').
//
// Control connection (TLS 1.3, both sides present self-signed Ed25519
// certificates, as the peer link does: net/link/tls_context.h). Messages are
// the link's length-prefixed JSON (net/link/message.h), each at most
// kMaxControlMessageBytes here:
//
//   node                                   relay
//   register {node, peers, local_addr}  -> checks node == the TLS key
//                                       <- registered {node, observed_addr, mapping, nat, ...}
//   peers {id, peers, rendezvous}       -> replaces the declared peers (and tokens)
//                                       <- ok {id}
//   signal {id, to, data}               -> forwarded only between mutual peers
//                                       <- ok {id}   (to: signal {from, data, from_host})
//   pipe {id, to, rendezvous?}          -> waits for `to` to ask too
//                                          (to: pipe_wanted {from, rendezvous?})
//                                       <- pipe_ready {id, peer, ticket, initiator}
//   ping {id}                           -> <- pong {id}
//   any refusal                         <- error {id?, code, message}
//   when a second registration of the key changes the verdict: nat {...}
//
// Rendezvous tokens let a node that is not declared yet reach one that is
// waiting for it: a provider registers one 32-byte token per open share
// link (derived from the link's id and secret hash, so the relay cannot pair
// by itself); a holder of the link asks for a pipe presenting the token, and
// the provider accepts by asking back with the same token. Nothing else is
// allowed between undeclared nodes (no signals).
//
// Node ids are NodeId text (crypto/node_id.h); signal data is base64 of at
// most kMaxSignalBytes opaque bytes (the nodes may encrypt them; the relay
// only routes). Unknown fields are ignored, unknown types refused.
//
// Pipe connection (plain TCP, no relay TLS): the node sends the 36-byte
// preface "YRP1" + the 32-byte ticket from pipe_ready; the relay answers one
// status byte (0 = joined, once the other end has arrived too) and from then
// on copies raw bytes between the two ends. The nodes run their own
// end-to-end TLS session (pinned keys) inside, so the relay sees ciphertext
// only, and its carrier is a plain socket (a TlsChannel for the link can be
// built on it directly). The ticket is a one-time capability issued over the
// authenticated control connection; it only assigns a socket to a pipe end.
// Someone who steals one can at most break that pipe's inner handshake.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/node_id.h"
#include "net/link/message.h"
#include "relay/nat.h"
#include "relay/refusal.h"

namespace yonder::relay {

constexpr int kProtocolVersion = 1;
// A peer list of kMaxPeers ids is ~66 KiB of JSON; a signal ~5.5 KiB.
constexpr size_t kMaxControlMessageBytes = 80 * 1024;
constexpr size_t kMaxSignalBytes = 4096;
constexpr size_t kMaxPeers = 1024;
constexpr size_t kMaxErrorText = 512;

using Ticket = std::array<uint8_t, 32>;
using Rendezvous = std::array<uint8_t, 32>;
constexpr size_t kMaxRendezvous = 64;  // tokens one node may register

// --- node -> relay
struct Register {
  PublicKeyBytes node{};
  std::vector<PublicKeyBytes> peers;
  std::vector<Rendezvous> rendezvous;
  std::optional<NetAddress> local_addr;
  bool probe = false;  // a second connection only to sample the NAT (see nat.h)
};
struct SetPeers {
  uint64_t id = 0;
  std::vector<PublicKeyBytes> peers;
  std::vector<Rendezvous> rendezvous;
};
struct SendSignal {
  uint64_t id = 0;
  PublicKeyBytes to{};
  Bytes data;
};
struct RequestPipe {
  uint64_t id = 0;
  PublicKeyBytes to{};
  std::optional<Rendezvous> rendezvous;  // instead of mutual declaration
};
struct Ping {
  uint64_t id = 0;
};
using ClientMessage = std::variant<Register, SetPeers, SendSignal, RequestPipe, Ping>;

// --- relay -> node
struct NatReport {
  NetAddress observed;                    // this connection's source as the relay saw it
  Mapping mapping = Mapping::kUnknown;    // this connection
  NatVerdict nat = NatVerdict::kUnknown;  // over the node's live registrations
  uint32_t samples = 0;
};
struct Registered {
  PublicKeyBytes node{};
  NatReport nat;
  uint64_t node_rate = 0;  // bytes/s this node may send through pipes (0: no limit)
  uint32_t max_signal_bytes = kMaxSignalBytes;
  uint32_t idle_timeout_ms = 0;  // ping more often than this
};
struct NatUpdate {
  NatReport nat;
};
struct Ack {
  uint64_t id = 0;
};
struct ErrorReply {
  std::optional<uint64_t> id;  // the request refused; none: the connection is closing
  Reason reason = Reason::kBadMessage;
  std::string message;
};
struct IncomingSignal {
  PublicKeyBytes from{};
  Bytes data;
  // The sender's IP as this relay sees its connection (its NAT's public
  // address): what the receiver observed of the sender through the relay it
  // pinned. A path hint to a public address must name this host or one the
  // sender's share link advertised (relay/path_hint.h). Absent from older relays.
  std::string from_host;
};
struct PipeWanted {
  PublicKeyBytes from{};
  std::optional<Rendezvous> rendezvous;  // the caller presented this token of ours
};
struct PipeReady {
  uint64_t id = 0;
  PublicKeyBytes peer{};
  Ticket ticket{};
  bool initiator = false;   // asked first: by convention the inner TLS client
  uint32_t expires_ms = 0;  // connect the pipe end before this
};
struct Pong {
  uint64_t id = 0;
};
using RelayMessage = std::variant<Registered, NatUpdate, Ack, ErrorReply, IncomingSignal, PipeWanted, PipeReady, Pong>;

nlohmann::json to_json(const ClientMessage& m);
nlohmann::json to_json(const RelayMessage& m);
// Untrusted input: every field checked and bounded; never throws.
Result<ClientMessage> decode_client_message(const nlohmann::json& j);
Result<RelayMessage> decode_relay_message(const nlohmann::json& j);

// The link's message reader with the relay's tighter bound. Feed it at most
// kMaxFeedBytes at a time and drain next() after each feed: then it never
// holds more than one bounded message plus one feed.
class ControlReader {
 public:
  static constexpr size_t kMaxFeedBytes = 16 * 1024;
  explicit ControlReader(size_t max_message = kMaxControlMessageBytes) : max_(max_message) {}
  void feed(ByteView in) { reader_.feed(in); }
  // The next message, std::nullopt when more bytes are needed, or an error
  // (too large, not JSON). After an error it stays failed.
  Result<std::optional<nlohmann::json>> next();
  size_t buffered() const { return reader_.buffered(); }

 private:
  link::MessageReader reader_;
  size_t max_;
  std::optional<Error> failed_;
};

// --- pipe connections
constexpr std::array<uint8_t, 4> kPipeMagic = {'Y', 'R', 'P', '1'};
constexpr size_t kPipePrefaceBytes = 4 + 32;
constexpr uint8_t kTlsHandshakeRecord = 0x16;

enum class PipeStatus : uint8_t {
  kJoined = 0,
  kBadTicket = 1,   // unknown, used or expired ticket
  kPeerAbsent = 2,  // the other end did not connect in time
  kRefused = 3,     // a limit (connections of this node), or the relay is stopping
};

Bytes encode_pipe_preface(const Ticket& ticket);
// Exactly kPipePrefaceBytes with the magic; the ticket otherwise.
Result<Ticket> decode_pipe_preface(ByteView bytes);
// The relay's answer as an Error for the node (ok for kJoined).
Status pipe_status_to_status(uint8_t status);

}  // namespace yonder::relay
