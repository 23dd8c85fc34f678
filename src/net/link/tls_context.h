// TLS 1.3 with pinned Ed25519 keys (OpenSSL 3): the peer link's carrier A.
//
// Each node presents a self-signed X.509 certificate over its own Ed25519
// identity key; no certificate authority is involved. What makes a session
// trustworthy is the key, checked in the verify callback against exactly what
// this side expects (a KeyPolicy):
//   - the dialer expects one key: the pinned provider, or the key in the share
//     link it is pairing with;
//   - the acceptor accepts pinned peers, and unknown keys only while a share
//     link could pair them (such a session may do nothing but pair).
// Because a TLS 1.3 client can finish its handshake before the server has
// checked the client's certificate, a session counts as established only once
// a frame from the other side arrives under it (see session.h).
//
// The short authentication string both sides show at pairing comes from the
// TLS exporter (RFC 8446 section 7.5, RFC 5705), so it is bound to this very
// session: a man in the middle with two sessions gets two different strings.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "crypto/identity.h"

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;

namespace yonder::link {

// What the verify callback knows about a peer key.
enum class KeyVerdict {
  kReject,       // handshake fails: the other side learns nothing
  kPinned,       // a known peer (or the one we dialled)
  kPairingOnly,  // unknown key, accepted only to attempt pairing
};

using KeyPolicy = std::function<KeyVerdict(const PublicKeyBytes&)>;

// One SSL_CTX per node and role, holding the node's certificate.
class TlsContext {
 public:
  static Result<std::shared_ptr<TlsContext>> create(const Identity& identity, bool server);
  ~TlsContext();
  SSL_CTX* native() const { return ctx_; }

  // Installs the policy for one SSL object (before its handshake).
  static void set_policy(SSL* ssl, KeyPolicy policy);
  // After the handshake: the peer's key and the verdict the policy gave.
  static std::optional<PublicKeyBytes> peer_key(SSL* ssl);
  static KeyVerdict verdict(SSL* ssl);

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

}  // namespace yonder::link
