#include "api/tls.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace yonder::api {
namespace asio = boost::asio;

namespace {

// The last OpenSSL error as text ("" when there is none), clearing the queue.
std::string openssl_reason() {
  unsigned long e = 0, last = 0;
  while ((e = ERR_get_error()) != 0) last = e;
  if (last == 0) return "";
  const char* reason = ERR_reason_error_string(last);
  return reason != nullptr ? reason : "error " + std::to_string(last);
}

Error load_error(const char* setting, const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, std::string(setting) + ": cannot use " + file + ": " + what);
}

std::vector<std::string> subject_alt_names(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      const unsigned char* data = ASN1_STRING_get0_data(n->d.dNSName);
      std::string name(reinterpret_cast<const char*>(data), static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
      // Names only (no wildcards, nothing a Host header could not carry).
      bool plain = !name.empty() && name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
      });
      if (!plain) continue;
      std::transform(name.begin(), name.end(), name.begin(),
                     [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
      out.push_back(name);
    } else if (n->type == GEN_IPADD) {
      const unsigned char* data = ASN1_STRING_get0_data(n->d.iPAddress);
      int len = ASN1_STRING_length(n->d.iPAddress);
      if (len == 4) {
        asio::ip::address_v4::bytes_type b;
        std::memcpy(b.data(), data, 4);
        out.push_back(asio::ip::address_v4(b).to_string());
      } else if (len == 16) {
        asio::ip::address_v6::bytes_type b;
        std::memcpy(b.data(), data, 16);
        out.push_back("[" + asio::ip::address_v6(b).to_string() + "]");
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

}  // namespace

ApiTls::~ApiTls() = default;

Result<std::shared_ptr<ApiTls>> ApiTls::load(const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() || key_file.empty()) {
    bool cert_missing = cert_file.empty();
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(cert_missing ? "api.tls_key" : "api.tls_cert") + " is set but " +
                          (cert_missing ? "api.tls_cert" : "api.tls_key") +
                          " is not: HTTPS for the API needs both, the PEM certificate chain (api.tls_cert) and "
                          "its private key (api.tls_key); set the other, or unset both");
  }
  for (auto [setting, file] : {std::pair{"api.tls_cert", &cert_file}, std::pair{"api.tls_key", &key_file}}) {
    FILE* f = std::fopen(file->c_str(), "rb");
    if (f == nullptr) return load_error(setting, *file, std::strerror(errno));
    std::fclose(f);
  }
  std::shared_ptr<ApiTls> tls(new ApiTls());
  tls->context_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* ctx = tls->context_->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    std::string why = openssl_reason();
    return load_error("api.tls_cert", cert_file,
                      (why.empty() ? std::string("unreadable") : why) +
                          "; it must be a readable PEM file holding the certificate (then any intermediates)");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::string why = openssl_reason();
    if (why.find("mismatch") != std::string::npos) {
      return load_error("api.tls_key", key_file,
                        "this key does not belong to the certificate in api.tls_cert (" + cert_file +
                            "); set the pair that was issued together");
    }
    return load_error(
        "api.tls_key", key_file,
        (why.empty() ? std::string("unreadable") : why) + "; it must be a readable, unencrypted PEM private key");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return load_error("api.tls_key", key_file,
                      "this key does not belong to the certificate in api.tls_cert (" + cert_file +
                          "); set the pair that was issued together");
  }
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert != nullptr && X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return load_error("api.tls_cert", cert_file, "the certificate has expired; renew it and restart yonderd");
  }
  if (cert != nullptr) tls->names_ = subject_alt_names(cert);
  return tls;
}

}  // namespace yonder::api
