#include "net/link/tls_context.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <mutex>

namespace yonder::link {
namespace {

// Per-SSL state: the policy and what it decided.
struct PeerCheck {
  KeyPolicy policy;
  KeyVerdict verdict = KeyVerdict::kReject;
  std::optional<PublicKeyBytes> key;
};

int ex_index() {
  static int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, [](void*, void* ptr, CRYPTO_EX_DATA*, int, long,
                                                                           void*) { delete static_cast<PeerCheck*>(ptr); });
  return index;
}

PeerCheck* check_of(SSL* ssl) { return static_cast<PeerCheck*>(SSL_get_ex_data(ssl, ex_index())); }

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::optional<PublicKeyBytes> raw_ed25519(X509* cert) {
  EVP_PKEY* pkey = X509_get0_pubkey(cert);
  if (pkey == nullptr || EVP_PKEY_id(pkey) != EVP_PKEY_ED25519) return std::nullopt;
  PublicKeyBytes key{};
  size_t len = key.size();
  if (EVP_PKEY_get_raw_public_key(pkey, key.data(), &len) != 1 || len != key.size()) return std::nullopt;
  return key;
}

// Chain validation is not what authenticates a peer here: the leaf's key is.
// Accept exactly a self-signed Ed25519 leaf whose key the policy accepts.
int verify_callback(int, X509_STORE_CTX* store) {
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 0;  // no chains
  PeerCheck* check = check_of(ssl);
  if (check == nullptr || !check->policy) return 0;
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  auto key = raw_ed25519(cert);
  if (!key) return 0;
  // The certificate must be signed by its own key (proof of possession is
  // the handshake's CertificateVerify; this just rejects garbage certs).
  if (X509_verify(cert, X509_get0_pubkey(cert)) != 1) return 0;
  check->key = key;
  check->verdict = check->policy(*key);
  if (check->verdict == KeyVerdict::kReject) return 0;
  X509_STORE_CTX_set_error(store, X509_V_OK);
  return 1;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::create(const Identity& identity, bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return make_error(ErrorCode::kInternal, "OpenSSL: " + openssl_error());
  auto holder = std::shared_ptr<TlsContext>(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // No session tickets or resumption: every session authenticates both keys.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  // AES-128-GCM first: as safe here and the fastest with AES-NI; ChaCha20 for
  // machines without it.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);

  EVP_PKEY* pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, identity.seed().data(), 32);
  X509* cert = X509_new();
  bool ok = pkey != nullptr && cert != nullptr;
  if (ok) {
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24 * 365 * 20);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("yonder"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    ok = X509_set_pubkey(cert, pkey) == 1 && X509_sign(cert, pkey, nullptr) > 0 &&
         SSL_CTX_use_certificate(ctx, cert) == 1 && SSL_CTX_use_PrivateKey(ctx, pkey) == 1 &&
         SSL_CTX_check_private_key(ctx) == 1;
  }
  std::string why = ok ? "" : openssl_error();
  X509_free(cert);
  EVP_PKEY_free(pkey);
  if (!ok) return make_error(ErrorCode::kInternal, "cannot build the TLS certificate: " + why);
  return holder;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

void TlsContext::set_policy(SSL* ssl, KeyPolicy policy) {
  auto* check = new PeerCheck{std::move(policy), KeyVerdict::kReject, std::nullopt};
  delete check_of(ssl);
  SSL_set_ex_data(ssl, ex_index(), check);
}

std::optional<PublicKeyBytes> TlsContext::peer_key(SSL* ssl) {
  PeerCheck* c = check_of(ssl);
  return c ? c->key : std::nullopt;
}

KeyVerdict TlsContext::verdict(SSL* ssl) {
  PeerCheck* c = check_of(ssl);
  return c ? c->verdict : KeyVerdict::kReject;
}

}  // namespace yonder::link
