// The ngtcp2 0.12 + GnuTLS adapter (see quic_connection.h for why this is
// the only file that includes their headers).
//
// The handshake: TLS 1.3 inside QUIC (RFC 9001), both sides present their
// Ed25519 key as a raw public key (RFC 7250: the Certificate message carries
// a bare SubjectPublicKeyInfo), and each side's verify callback compares the
// peer's key with exactly the one it expects: the client the key it dialled,
// the server whatever accept_key allows. ALPN "yonder/1" is mandatory. The
// connection counts as established at handshake confirmation (RFC 9001
// 4.1.2: for the client, the server's HANDSHAKE_DONE; for the server, its own
// handshake completion), so by then both keys were checked.
#include "net/quic/quic_connection.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace yonder::quic {
namespace {

constexpr char kAlpn[] = "yonder/1";
// TLS 1.3 only, QUIC's AEADs, no middlebox compatibility mode (RFC 9001
// 8.4), and raw public keys only, both ways.
constexpr char kPriority[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
    "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:-CTYPE-ALL:+CTYPE-CLI-RAWPK:+CTYPE-SRV-RAWPK:"
    "%DISABLE_TLS13_COMPAT_MODE";

// DER prefixes of an Ed25519 SubjectPublicKeyInfo and PKCS#8 private key
// (RFC 8410): the 32 key bytes follow.
constexpr std::array<uint8_t, 12> kSpkiPrefix = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                                 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
constexpr std::array<uint8_t, 16> kPkcs8Prefix = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
                                                  0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};

ngtcp2_tstamp ts(MonoTime t) {
  return static_cast<ngtcp2_tstamp>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
MonoTime from_ts(ngtcp2_tstamp t) {
  if (t == UINT64_MAX) return MonoTime::max();
  return MonoTime(std::chrono::duration_cast<MonoTime::duration>(std::chrono::nanoseconds(t)));
}
ngtcp2_duration ns(std::chrono::milliseconds d) { return static_cast<ngtcp2_duration>(d.count()) * NGTCP2_MILLISECONDS; }

void random_bytes(uint8_t* out, size_t n) {
  if (gnutls_rnd(GNUTLS_RND_RANDOM, out, n) != 0) std::abort();  // no randomness: nothing safe to do
}

std::string cid_string(const ngtcp2_cid& cid) { return std::string(reinterpret_cast<const char*>(cid.data), cid.datalen); }

std::string hex_alert(uint64_t code) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(code));
  return buf;
}

}  // namespace

class QuicCredentials {
 public:
  ~QuicCredentials() {
    if (cred_ != nullptr) gnutls_certificate_free_credentials(cred_);
  }
  gnutls_certificate_credentials_t cred_ = nullptr;
};

Result<std::shared_ptr<QuicCredentials>> make_credentials(const Identity& identity) {
  auto creds = std::make_shared<QuicCredentials>();
  if (gnutls_certificate_allocate_credentials(&creds->cred_) != GNUTLS_E_SUCCESS) {
    return make_error(ErrorCode::kInternal, "GnuTLS could not allocate credentials for the QUIC carrier");
  }
  std::array<uint8_t, kSpkiPrefix.size() + 32> spki{};
  std::copy(kSpkiPrefix.begin(), kSpkiPrefix.end(), spki.begin());
  std::copy(identity.public_key().begin(), identity.public_key().end(), spki.begin() + kSpkiPrefix.size());
  std::array<uint8_t, kPkcs8Prefix.size() + 32> pkcs8{};
  std::copy(kPkcs8Prefix.begin(), kPkcs8Prefix.end(), pkcs8.begin());
  ByteView seed = identity.seed();
  std::copy(seed.begin(), seed.end(), pkcs8.begin() + kPkcs8Prefix.size());
  gnutls_datum_t spki_d{spki.data(), static_cast<unsigned>(spki.size())};
  gnutls_datum_t key_d{pkcs8.data(), static_cast<unsigned>(pkcs8.size())};
  int rv = gnutls_certificate_set_rawpk_key_mem(creds->cred_, &spki_d, &key_d, GNUTLS_X509_FMT_DER, nullptr, 0,
                                                nullptr, 0, 0);
  gnutls_memset(pkcs8.data(), 0, pkcs8.size());
  if (rv < 0) {
    return make_error(ErrorCode::kInternal,
                      std::string("GnuTLS refused the node's Ed25519 key as a raw public key: ") + gnutls_strerror(rv));
  }
  return creds;
}

DatagramHeader decode_header(ByteView datagram) {
  DatagramHeader h;
  if (!looks_like_quic(datagram)) return h;
  ngtcp2_version_cid vc{};
  int rv = ngtcp2_pkt_decode_version_cid(&vc, datagram.data(), datagram.size(), kConnectionIdLength);
  if (rv != 0 && rv != NGTCP2_ERR_VERSION_NEGOTIATION) return h;
  if (vc.dcidlen == 0 || vc.dcidlen > NGTCP2_MAX_CIDLEN) return h;
  h.dcid.assign(reinterpret_cast<const char*>(vc.dcid), vc.dcidlen);
  if ((datagram[0] & 0x80) != 0 && rv == 0) {
    ngtcp2_pkt_hd hd{};
    h.initial = ngtcp2_accept(&hd, datagram.data(), datagram.size()) == 0;
  }
  return h;
}

struct QuicConnection::Impl {
  QuicConnection* owner = nullptr;
  ngtcp2_conn* conn = nullptr;
  gnutls_session_t session = nullptr;
  ngtcp2_crypto_conn_ref conn_ref{};
  std::shared_ptr<QuicCredentials> creds;
  std::optional<PublicKeyBytes> expected;                   // client
  std::function<bool(const PublicKeyBytes&)> accept_key;    // server
  ngtcp2_sockaddr_union local{};
  ngtcp2_socklen local_len = 0;
  ngtcp2_sockaddr_union remote{};
  ngtcp2_socklen remote_len = 0;
  ngtcp2_connection_close_error close_error{};
  bool close_written = false;

  ~Impl() {
    if (conn != nullptr) ngtcp2_conn_del(conn);
    if (session != nullptr) gnutls_deinit(session);
  }

  ngtcp2_path path() {
    ngtcp2_path p{};
    p.local.addr = &local.sa;
    p.local.addrlen = local_len;
    p.remote.addr = &remote.sa;
    p.remote.addrlen = remote_len;
    return p;
  }

  static void set_addr(const udp::endpoint& ep, ngtcp2_sockaddr_union* out, ngtcp2_socklen* len) {
    std::memcpy(out, ep.data(), ep.size());
    *len = static_cast<ngtcp2_socklen>(ep.size());
  }

  static udp::endpoint to_endpoint(const ngtcp2_addr& a) {
    udp::endpoint ep;
    std::memcpy(ep.data(), a.addr, std::min<size_t>(a.addrlen, sizeof(ngtcp2_sockaddr_union)));
    ep.resize(a.addrlen);
    return ep;
  }

  // The peer's closing reason, in words.
  void take_peer_close() {
    ngtcp2_connection_close_error cc{};
    ngtcp2_conn_get_connection_close_error(conn, &cc);
    std::string reason(reinterpret_cast<const char*>(cc.reason), cc.reason ? std::min<size_t>(cc.reasonlen, 200) : 0);
    bool no_error = cc.error_code == 0 && (cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ||
                                           cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT);
    owner->over_ = true;
    if (no_error && owner->confirmed_) {
      owner->closed_cleanly_ = true;
      if (owner->failure_.empty()) owner->failure_ = "the peer closed the QUIC connection";
      return;
    }
    if (!owner->failure_.empty()) return;
    if (cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT && cc.error_code >= NGTCP2_CRYPTO_ERROR &&
        cc.error_code < NGTCP2_CRYPTO_ERROR + 0x100) {
      owner->failure_ = "the peer refused the TLS handshake (alert " +
                        std::to_string(cc.error_code - NGTCP2_CRYPTO_ERROR) +
                        "): it does not accept this node's key; pair the two nodes first";
      return;
    }
    owner->failure_ = "the peer closed the QUIC connection (error " + hex_alert(cc.error_code) +
                      (reason.empty() ? "" : ": " + reason) + ")";
  }

  // A local fatal error: remember what to tell the peer.
  void fail_local(int liberr) {
    owner->over_ = true;
    if (liberr == NGTCP2_ERR_CRYPTO) {
      ngtcp2_connection_close_error_set_transport_error_tls_alert(&close_error, ngtcp2_conn_get_tls_alert(conn),
                                                                 nullptr, 0);
      if (owner->failure_.empty()) {
        owner->failure_ = std::string("the QUIC TLS handshake failed (alert ") +
                          std::to_string(ngtcp2_conn_get_tls_alert(conn)) + ")";
      }
      return;
    }
    ngtcp2_connection_close_error_set_transport_error_liberr(&close_error, liberr, nullptr, 0);
    if (owner->failure_.empty()) {
      owner->failure_ = liberr == NGTCP2_ERR_IDLE_CLOSE
                            ? "the QUIC path went silent (idle timeout): the peer or the path is gone"
                            : std::string("QUIC connection failed: ") + ngtcp2_strerror(liberr);
    }
  }

  // Bit 0x40 must stay set on every packet we send: the endpoint's
  // demultiplexer hands datagrams without it to the puncher and STUN. ngtcp2
  // 0.12 always advertises "grease the QUIC bit" (RFC 9287) whatever the
  // transport parameter says, and clears the bit on packets to a peer that
  // advertised it, so we forget the peer's advertisement as soon as its
  // parameters arrive (inside read_pkt, before anything is written).
  void no_bit_greasing() {
    auto* remote_params = ngtcp2_conn_get_remote_transport_params(conn);
    if (remote_params != nullptr && remote_params->grease_quic_bit) {
      const_cast<ngtcp2_transport_params*>(remote_params)->grease_quic_bit = 0;
    }
  }

  // --- GnuTLS: the peer's raw key ---
  static int verify_peer(gnutls_session_t s) {
    auto* ref = static_cast<ngtcp2_crypto_conn_ref*>(gnutls_session_get_ptr(s));
    auto* self = static_cast<Impl*>(ref->user_data);
    QuicConnection& c = *self->owner;
    if (gnutls_certificate_type_get2(s, GNUTLS_CTYPE_PEERS) != GNUTLS_CRT_RAWPK) {
      c.failure_ = "the peer presented no raw public key (not a Yonder node?)";
      return -1;
    }
    unsigned n = 0;
    const gnutls_datum_t* certs = gnutls_certificate_get_peers(s, &n);
    if (certs == nullptr || n != 1 || certs[0].size != kSpkiPrefix.size() + 32 ||
        std::memcmp(certs[0].data, kSpkiPrefix.data(), kSpkiPrefix.size()) != 0) {
      c.failure_ = "the peer's key is not an Ed25519 key (not a Yonder node?)";
      return -1;
    }
    PublicKeyBytes key{};
    std::memcpy(key.data(), certs[0].data + kSpkiPrefix.size(), key.size());
    if (self->expected) {
      if (key != *self->expected) {
        c.failure_ = "the peer answered with a different key (a man in the middle?)";
        return -1;
      }
    } else if (!self->accept_key || !self->accept_key(key)) {
      c.failure_ = "the peer's key is not accepted here";
      return -1;
    }
    c.peer_key_ = key;
    return 0;
  }

  static ngtcp2_conn* get_conn(ngtcp2_crypto_conn_ref* ref) { return static_cast<Impl*>(ref->user_data)->conn; }

  Status init_tls(bool server) {
    unsigned flags = (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_ENABLE_RAWPK | GNUTLS_NO_END_OF_EARLY_DATA;
    if (gnutls_init(&session, flags) != GNUTLS_E_SUCCESS) {
      return make_error(ErrorCode::kInternal, "GnuTLS could not start a session for QUIC");
    }
    int rv = server ? ngtcp2_crypto_gnutls_configure_server_session(session)
                    : ngtcp2_crypto_gnutls_configure_client_session(session);
    if (rv != 0) return make_error(ErrorCode::kInternal, "ngtcp2 could not configure the GnuTLS session");
    const char* err = nullptr;
    rv = gnutls_priority_set_direct(session, kPriority, &err);
    if (rv != GNUTLS_E_SUCCESS) {
      return make_error(ErrorCode::kInternal, std::string("GnuTLS rejected the QUIC priority string near '") +
                                                  (err ? err : "?") + "': " + gnutls_strerror(rv));
    }
    conn_ref.get_conn = &Impl::get_conn;
    conn_ref.user_data = this;
    gnutls_session_set_ptr(session, &conn_ref);
    if (gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, creds->cred_) != GNUTLS_E_SUCCESS) {
      return make_error(ErrorCode::kInternal, "GnuTLS could not attach the node's key to the QUIC session");
    }
    if (server) gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(session, &Impl::verify_peer);
    gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>(kAlpn)),
                        static_cast<unsigned>(sizeof kAlpn - 1)};
    gnutls_alpn_set_protocols(session, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    return ok_status();
  }

  // --- ngtcp2 callbacks: record, never act ---
  static Impl* self(void* user_data) { return static_cast<Impl*>(user_data); }

  static void rand_cb(uint8_t* dest, size_t len, const ngtcp2_rand_ctx*) { random_bytes(dest, len); }

  static int new_cid_cb(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen, void* user_data) {
    random_bytes(cid->data, cidlen);
    cid->datalen = cidlen;
    random_bytes(token, NGTCP2_STATELESS_RESET_TOKENLEN);
    auto& hooks = self(user_data)->owner->hooks_;
    if (hooks.cid_added) hooks.cid_added(cid_string(*cid));
    return 0;
  }

  static int remove_cid_cb(ngtcp2_conn*, const ngtcp2_cid* cid, void* user_data) {
    auto& hooks = self(user_data)->owner->hooks_;
    if (hooks.cid_removed) hooks.cid_removed(cid_string(*cid));
    return 0;
  }

  static int recv_stream_data_cb(ngtcp2_conn*, uint32_t flags, int64_t stream_id, uint64_t, const uint8_t* data,
                                 size_t datalen, void* user_data, void*) {
    QuicConnection& c = *self(user_data)->owner;
    if (stream_id != 0) return 0;  // we allow no other stream; ngtcp2 refuses them
    if (c.rx_pos_ == c.rx_.size()) {
      c.rx_.clear();
      c.rx_pos_ = 0;
    } else if (c.rx_pos_ > 1024 * 1024) {
      c.rx_.erase(c.rx_.begin(), c.rx_.begin() + static_cast<ptrdiff_t>(c.rx_pos_));
      c.rx_pos_ = 0;
    }
    c.rx_.insert(c.rx_.end(), data, data + datalen);
    if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) c.rx_fin_ = true;
    return 0;
  }

  static int acked_cb(ngtcp2_conn*, int64_t stream_id, uint64_t offset, uint64_t datalen, void* user_data, void*) {
    QuicConnection& c = *self(user_data)->owner;
    if (stream_id != 0) return 0;
    c.tx_acked_ = std::max(c.tx_acked_, offset + datalen);
    while (c.tx_chunk_head_ < c.tx_chunks_.size() &&
           c.tx_base_ + c.tx_chunks_[c.tx_chunk_head_].size() <= c.tx_acked_) {
      c.tx_base_ += c.tx_chunks_[c.tx_chunk_head_].size();
      Bytes().swap(c.tx_chunks_[c.tx_chunk_head_]);
      ++c.tx_chunk_head_;
    }
    // ngtcp2 holds pointers into live chunks only; compacting moves the
    // vectors' handles, not their bytes.
    if (c.tx_chunk_head_ > 64 && c.tx_chunk_head_ * 2 > c.tx_chunks_.size()) {
      c.tx_chunks_.erase(c.tx_chunks_.begin(), c.tx_chunks_.begin() + static_cast<ptrdiff_t>(c.tx_chunk_head_));
      c.tx_chunk_head_ = 0;
    }
    return 0;
  }

  static int stream_open_cb(ngtcp2_conn*, int64_t stream_id, void* user_data) {
    if (stream_id == 0) self(user_data)->owner->stream_open_ = true;
    return 0;
  }

  static int stream_reset_cb(ngtcp2_conn*, int64_t stream_id, uint64_t, uint64_t, void* user_data, void*) {
    QuicConnection& c = *self(user_data)->owner;
    if (stream_id == 0 && c.failure_.empty()) c.failure_ = "the peer reset the link stream";
    if (stream_id == 0) c.over_ = true;
    return 0;
  }

  static int handshake_completed_cb(ngtcp2_conn*, void* user_data) {
    QuicConnection& c = *self(user_data)->owner;
    if (!c.peer_key_) return NGTCP2_ERR_CALLBACK_FAILURE;  // no key checked: never proceed
    if (c.server_) c.confirmed_ = true;  // RFC 9001 4.1.2: the server confirms at completion
    return 0;
  }

  static int handshake_confirmed_cb(ngtcp2_conn*, void* user_data) {
    QuicConnection& c = *self(user_data)->owner;
    if (!c.peer_key_) return NGTCP2_ERR_CALLBACK_FAILURE;
    c.confirmed_ = true;
    return 0;
  }

  ngtcp2_callbacks callbacks(bool server) {
    ngtcp2_callbacks cb{};
    if (server) {
      cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
    } else {
      cb.client_initial = ngtcp2_crypto_client_initial_cb;
      cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
    }
    cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    cb.encrypt = ngtcp2_crypto_encrypt_cb;
    cb.decrypt = ngtcp2_crypto_decrypt_cb;
    cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
    cb.update_key = ngtcp2_crypto_update_key_cb;
    cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
    cb.rand = rand_cb;
    cb.get_new_connection_id = new_cid_cb;
    cb.remove_connection_id = remove_cid_cb;
    cb.recv_stream_data = recv_stream_data_cb;
    cb.acked_stream_data_offset = acked_cb;
    cb.stream_open = stream_open_cb;
    cb.stream_reset = stream_reset_cb;
    cb.handshake_completed = handshake_completed_cb;
    cb.handshake_confirmed = handshake_confirmed_cb;
    return cb;
  }

  static void settings_and_params(const QuicConfig& config, bool server, MonoTime now, ngtcp2_settings* s,
                                  ngtcp2_transport_params* p) {
    ngtcp2_settings_default(s);
    s->initial_ts = ts(now);
    s->cc_algo = NGTCP2_CC_ALGO_CUBIC;
    s->max_window = config.max_connection_window;
    s->max_stream_window = config.max_stream_window;
    s->handshake_timeout = UINT64_MAX;  // ours (QuicChannel's timer) rules, with a clearer message
    ngtcp2_transport_params_default(p);
    p->initial_max_stream_data_bidi_local = config.stream_window;
    p->initial_max_stream_data_bidi_remote = config.stream_window;
    p->initial_max_stream_data_uni = 0;
    p->initial_max_data = config.connection_window;
    p->initial_max_streams_bidi = server ? 1 : 0;  // the client opens stream 0, nobody opens more
    p->initial_max_streams_uni = 0;
    p->max_idle_timeout = ns(config.idle_timeout);
  }
};

QuicConnection::~QuicConnection() = default;

Result<std::unique_ptr<QuicConnection>> QuicConnection::client(std::shared_ptr<QuicCredentials> creds,
                                                               const PublicKeyBytes& expected_peer,
                                                               const udp::endpoint& local, const udp::endpoint& remote,
                                                               const QuicConfig& config, Hooks hooks, MonoTime now) {
  std::unique_ptr<QuicConnection> c(new QuicConnection());
  c->hooks_ = std::move(hooks);
  c->remote_ = remote;
  c->impl_ = std::make_unique<Impl>();
  Impl& m = *c->impl_;
  m.owner = c.get();
  m.creds = std::move(creds);
  m.expected = expected_peer;
  Impl::set_addr(local, &m.local, &m.local_len);
  Impl::set_addr(remote, &m.remote, &m.remote_len);
  ngtcp2_cid dcid{}, scid{};
  dcid.datalen = kConnectionIdLength;
  random_bytes(dcid.data, dcid.datalen);
  scid.datalen = kConnectionIdLength;
  random_bytes(scid.data, scid.datalen);
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  Impl::settings_and_params(config, false, now, &settings, &params);
  ngtcp2_callbacks cb = m.callbacks(false);
  ngtcp2_path path = m.path();
  int rv = ngtcp2_conn_client_new(&m.conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings, &params,
                                  nullptr, &m);
  if (rv != 0) return make_error(ErrorCode::kInternal, std::string("ngtcp2 could not start a client: ") + ngtcp2_strerror(rv));
  YONDER_TRY(m.init_tls(false));
  ngtcp2_conn_set_tls_native_handle(m.conn, m.session);
  ngtcp2_conn_set_keep_alive_timeout(m.conn, ns(config.keepalive));
  if (c->hooks_.cid_added) c->hooks_.cid_added(cid_string(scid));
  return c;
}

Result<std::unique_ptr<QuicConnection>> QuicConnection::server(std::shared_ptr<QuicCredentials> creds,
                                                               std::function<bool(const PublicKeyBytes&)> accept_key,
                                                               const udp::endpoint& local, const udp::endpoint& remote,
                                                               ByteView first, const QuicConfig& config, Hooks hooks,
                                                               MonoTime now) {
  ngtcp2_pkt_hd hd{};
  if (ngtcp2_accept(&hd, first.data(), first.size()) != 0) {
    return make_error(ErrorCode::kInvalidArgument, "not a QUIC v1 Initial packet");
  }
  std::unique_ptr<QuicConnection> c(new QuicConnection());
  c->server_ = true;
  c->hooks_ = std::move(hooks);
  c->remote_ = remote;
  c->impl_ = std::make_unique<Impl>();
  Impl& m = *c->impl_;
  m.owner = c.get();
  m.creds = std::move(creds);
  m.accept_key = std::move(accept_key);
  Impl::set_addr(local, &m.local, &m.local_len);
  Impl::set_addr(remote, &m.remote, &m.remote_len);
  ngtcp2_cid scid{};
  scid.datalen = kConnectionIdLength;
  random_bytes(scid.data, scid.datalen);
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  Impl::settings_and_params(config, true, now, &settings, &params);
  params.original_dcid = hd.dcid;
  ngtcp2_callbacks cb = m.callbacks(true);
  ngtcp2_path path = m.path();
  int rv = ngtcp2_conn_server_new(&m.conn, &hd.scid, &scid, &path, hd.version, &cb, &settings, &params, nullptr, &m);
  if (rv != 0) return make_error(ErrorCode::kInternal, std::string("ngtcp2 could not start a server: ") + ngtcp2_strerror(rv));
  YONDER_TRY(m.init_tls(true));
  ngtcp2_conn_set_tls_native_handle(m.conn, m.session);
  ngtcp2_conn_set_keep_alive_timeout(m.conn, ns(config.keepalive));
  if (c->hooks_.cid_added) {
    c->hooks_.cid_added(cid_string(scid));
    c->hooks_.cid_added(cid_string(hd.dcid));  // the client's first packets still use it
  }
  if (!c->receive(first, remote, now)) {
    return make_error(ErrorCode::kInvalidArgument, "the first QUIC packet was refused: " + c->failure_);
  }
  return c;
}

bool QuicConnection::receive(ByteView datagram, const udp::endpoint& from, MonoTime now) {
  Impl& m = *impl_;
  if (over_) return false;
  ngtcp2_sockaddr_union remote{};
  std::memcpy(&remote, from.data(), from.size());
  ngtcp2_path path{};
  path.local.addr = &m.local.sa;
  path.local.addrlen = m.local_len;
  path.remote.addr = &remote.sa;
  path.remote.addrlen = static_cast<ngtcp2_socklen>(from.size());
  ngtcp2_pkt_info pi{};
  int rv = ngtcp2_conn_read_pkt(m.conn, &path, &pi, datagram.data(), datagram.size(), ts(now));
  if (rv == 0) {
    m.no_bit_greasing();
    remote_ = Impl::to_endpoint(ngtcp2_conn_get_path(m.conn)->remote);
    return !over_;
  }
  if (rv == NGTCP2_ERR_DRAINING) {
    m.take_peer_close();
    return false;
  }
  if (rv == NGTCP2_ERR_DISCARD_PKT) return !over_;
  m.fail_local(rv);
  return false;
}

void QuicConnection::stream_append(ByteView data) {
  if (data.empty()) return;
  tx_chunks_.emplace_back(data.begin(), data.end());
  tx_end_ += data.size();
}

size_t QuicConnection::stream_read(uint8_t* out, size_t size) {
  size_t n = std::min(size, stream_readable());
  if (n == 0) return 0;
  std::memcpy(out, rx_.data() + rx_pos_, n);
  rx_pos_ += n;
  if (!over_) {
    ngtcp2_conn_extend_max_stream_offset(impl_->conn, 0, n);
    ngtcp2_conn_extend_max_offset(impl_->conn, n);
  }
  return n;
}

size_t QuicConnection::write_batch(uint8_t* out, size_t cap, size_t max_segments, size_t* segment, udp::endpoint* to,
                                   MonoTime now) {
  Impl& m = *impl_;
  *segment = 0;
  if (over_) return 0;
  ngtcp2_tstamp t = ts(now);
  if (!server_ && !stream_open_ && ngtcp2_conn_get_handshake_completed(m.conn)) {
    int64_t id = -1;
    if (ngtcp2_conn_open_bidi_stream(m.conn, &id, nullptr) == 0) {
      stream_open_ = true;
      open_frame_owed_ = true;  // the server learns of stream 0 even if we have nothing to say yet
    }
  }
  size_t max_payload = ngtcp2_conn_get_path_max_tx_udp_payload_size(m.conn);
  size_t budget = std::min(cap, std::max(ngtcp2_conn_get_send_quantum(m.conn), max_payload));
  size_t len = 0;
  size_t count = 0;
  bool stream_blocked = false;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  std::array<ngtcp2_vec, 16> vecs{};
  while (count < max_segments && len + (count == 0 ? max_payload : *segment) <= budget) {
    // What stream 0 may send: unsent bytes from tx_sent_, as vectors.
    size_t nvec = 0;
    bool fin = false;
    int64_t stream_id = -1;
    if (stream_open_ && !stream_blocked) {
      uint64_t off = tx_base_;
      for (size_t i = tx_chunk_head_; i < tx_chunks_.size() && nvec < vecs.size(); ++i) {
        const Bytes& ch = tx_chunks_[i];
        uint64_t end = off + ch.size();
        if (end > tx_sent_) {
          size_t skip = static_cast<size_t>(tx_sent_ > off ? tx_sent_ - off : 0);
          vecs[nvec].base = const_cast<uint8_t*>(ch.data() + skip);
          vecs[nvec].len = ch.size() - skip;
          ++nvec;
        }
        off = end;
      }
      fin = fin_wanted_ && !fin_sent_ && nvec < vecs.size();  // every unsent byte is in vecs
      if (fin) {
        uint64_t total = 0;
        for (size_t i = 0; i < nvec; ++i) total += vecs[i].len;
        fin = tx_sent_ + total == tx_end_;
      }
      if (nvec > 0 || fin || open_frame_owed_) stream_id = 0;
    }
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_ssize datalen = -1;
    size_t dest = count == 0 ? max_payload : *segment;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(m.conn, &ps.path, nullptr, out + len, dest, &datalen, flags, stream_id,
                                               nvec ? vecs.data() : nullptr, nvec, t);
    if (datalen >= 0 && stream_id == 0) {
      tx_sent_ += static_cast<uint64_t>(datalen);
      open_frame_owed_ = false;
      if (fin && tx_sent_ == tx_end_) fin_sent_ = true;
    }
    if (n == NGTCP2_ERR_WRITE_MORE) continue;  // the packet has room for more
    if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR ||
        n == NGTCP2_ERR_STREAM_NOT_FOUND) {
      stream_blocked = true;  // flow control: send ACKs and the like only
      continue;
    }
    if (n < 0) {
      m.fail_local(static_cast<int>(n));
      break;
    }
    if (n == 0) break;
    if (count == 0) {
      *to = Impl::to_endpoint(ps.path.remote);
      *segment = static_cast<size_t>(n);
    }
    len += static_cast<size_t>(n);
    ++count;
    if (static_cast<size_t>(n) < *segment || *segment < max_payload) break;  // a short one ends the batch
  }
  // Pacing starts with the handshake done: before the first RTT sample
  // ngtcp2 paces at cwnd / 333 ms (RFC 9002's initial RTT), which held the
  // client's Finished back by ~20 ms behind its first Initial on loopback.
  if (len > 0 && ngtcp2_conn_get_handshake_completed(m.conn)) ngtcp2_conn_update_pkt_tx_time(m.conn, t);
  return len;
}

MonoTime QuicConnection::expiry() const { return over_ ? MonoTime::max() : from_ts(ngtcp2_conn_get_expiry(impl_->conn)); }

bool QuicConnection::on_expiry(MonoTime now) {
  if (over_) return false;
  int rv = ngtcp2_conn_handle_expiry(impl_->conn, ts(now));
  if (rv != 0) {
    impl_->fail_local(rv);
    return false;
  }
  return true;
}

size_t QuicConnection::write_close(uint8_t* out, size_t cap, udp::endpoint* to, MonoTime now) {
  Impl& m = *impl_;
  if (m.close_written || ngtcp2_conn_is_in_draining_period(m.conn) || ngtcp2_conn_is_in_closing_period(m.conn)) {
    return 0;
  }
  m.close_written = true;
  if (!over_) ngtcp2_connection_close_error_set_application_error(&m.close_error, 0, nullptr, 0);
  // A peer that closed cleanly needs nothing more; after an idle timeout
  // ngtcp2 itself writes nothing (the IDLE_CLOSE type).
  if (closed_cleanly_) return 0;
  over_ = true;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(m.conn, &ps.path, nullptr, out, cap, &m.close_error, ts(now));
  if (n <= 0) return 0;
  *to = Impl::to_endpoint(ps.path.remote);
  return static_cast<size_t>(n);
}

std::chrono::nanoseconds QuicConnection::smoothed_rtt() const {
  ngtcp2_conn_stat st{};
  ngtcp2_conn_get_conn_stat(impl_->conn, &st);
  return std::chrono::nanoseconds(st.smoothed_rtt);
}

bool QuicConnection::export_keying_material(std::string_view label, uint8_t* out, size_t size) {
  if (!confirmed_ || impl_->session == nullptr) return false;
  return gnutls_prf_rfc5705(impl_->session, label.size(), label.data(), 0, nullptr, size,
                            reinterpret_cast<char*>(out)) == GNUTLS_E_SUCCESS;
}

}  // namespace yonder::quic
