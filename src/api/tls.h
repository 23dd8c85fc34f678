// The API's own TLS identity for serving HTTPS on the TCP listener
// (api.tls_cert, api.tls_key): an X.509 certificate chain and its private
// key, both PEM files the operator provides (a CA-issued certificate, or a
// self-signed one that clients are told to trust). Unrelated to the peer
// link's TLS (net/link), which pins raw Ed25519 keys and has no certificates.
//
// TLS 1.2 and 1.3 only, the OpenSSL defaults for ciphers otherwise, no
// session tickets (nothing to rotate), no client certificates (the API token
// is the credential).
//
// Loaded once at start by the daemon; the server's connections share it
// read-only on the io thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace boost::asio::ssl {
class context;
}

namespace yonder::api {

class ApiTls {
 public:
  // Reads both files. Errors name the setting and the file, and say what is
  // wrong (missing, not PEM, key does not match the certificate, expired).
  static Result<std::shared_ptr<ApiTls>> load(const std::string& cert_file, const std::string& key_file);
  ~ApiTls();
  ApiTls(const ApiTls&) = delete;
  ApiTls& operator=(const ApiTls&) = delete;

  boost::asio::ssl::context& context() { return *context_; }
  // The names the certificate is valid for (subjectAltName DNS names,
  // lower-cased, and IP addresses, IPv6 in brackets): the host names the
  // API accepts in Host and Origin besides its bound address.
  const std::vector<std::string>& names() const { return names_; }

 private:
  ApiTls() = default;
  std::unique_ptr<boost::asio::ssl::context> context_;
  std::vector<std::string> names_;
};

}  // namespace yonder::api
