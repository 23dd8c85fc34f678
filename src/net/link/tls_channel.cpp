#include "net/link/tls_channel.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace yonder::link {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr size_t kRxBuffer = 256 * 1024;

error_code ssl_category_error() { return asio::error::make_error_code(asio::error::access_denied); }
}  // namespace

TlsChannel::TlsChannel(asio::ip::tcp::socket socket, SSL_CTX* ctx, bool server)
    : socket_(std::move(socket)), ssl_(SSL_new(ctx)), in_(BIO_new(BIO_s_mem())), out_(BIO_new(BIO_s_mem())),
      rx_(kRxBuffer) {
  BIO_set_mem_eof_return(in_, -1);  // empty input means "retry", not EOF
  BIO_set_mem_eof_return(out_, -1);
  SSL_set_bio(ssl_, in_, out_);  // the SSL owns both BIOs now
  if (server) SSL_set_accept_state(ssl_);
  else SSL_set_connect_state(ssl_);
}

TlsChannel::~TlsChannel() { SSL_free(ssl_); }

bool TlsChannel::export_keying_material(std::string_view label, uint8_t* out, size_t size) {
  return SSL_export_keying_material(ssl_, out, size, label.data(), label.size(), nullptr, 0, 0) == 1;
}

error_code TlsChannel::ssl_error(const char*) {
  ERR_clear_error();
  return ssl_category_error();
}

void TlsChannel::close() {
  error_code ignored;
  socket_.close(ignored);
  // Handlers stored here may hold their owners (and this channel) alive:
  // drop them so no reference cycle outlives the connection.
  auto drained = std::move(drained_);
  drained_.clear();
  auto handshake = std::move(handshake_done_);
  handshake_done_ = nullptr;
  auto read = std::move(read_done_);
  read_done_ = nullptr;
}

// Moves every pending ciphertext byte from OpenSSL to the socket, one write
// at a time; calls the drained_ handlers when nothing is left.
void TlsChannel::pump() {
  if (writing_) return;
  size_t pending = BIO_ctrl_pending(out_);
  if (pending == 0) {
    auto handlers = std::move(drained_);
    drained_.clear();
    for (auto& h : handlers) h(error_code());
    return;
  }
  if (tx_.capacity() < pending) tx_.reserve(pending);
  tx_.resize(pending);  // no zero-fill cost once capacity is there: values are overwritten
  int n = BIO_read(out_, tx_.data(), static_cast<int>(pending));
  tx_.resize(n > 0 ? static_cast<size_t>(n) : 0);
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(tx_), [this, self](error_code ec, size_t) {
    writing_ = false;
    if (ec) {
      auto handlers = std::move(drained_);
      drained_.clear();
      for (auto& h : handlers) h(ec);
      return;
    }
    pump();
  });
}

// Reads what the socket has into OpenSSL's input.
void TlsChannel::fill(std::function<void(error_code)> then) {
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(rx_), [this, self, then](error_code ec, size_t n) {
    if (ec) return then(ec);
    BIO_write(in_, rx_.data(), static_cast<int>(n));
    then(error_code());
  });
}

void TlsChannel::async_handshake(Handler done) {
  handshake_done_ = std::move(done);
  handshake_step();
}

void TlsChannel::handshake_step() {
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
  auto self = shared_from_this();
  if (r == 1) {
    // Send our last flight (the client's Finished) before reporting success.
    drained_.push_back([this](error_code ec) {
      auto h = std::move(handshake_done_);
      if (h) h(ec);
    });
    pump();
    return;
  }
  if (err == SSL_ERROR_WANT_READ) {
    drained_.push_back([this](error_code ec) {
      auto keep = shared_from_this();
      if (ec) {
        auto h = std::move(handshake_done_);
        if (h) h(ec);
        return;
      }
      fill([this, keep](error_code fec) {
        if (fec) {
          auto h = std::move(handshake_done_);
          if (h) h(fec);
          return;
        }
        handshake_step();
      });
    });
    pump();
    return;
  }
  // A refused certificate or a broken peer: send our alert, then fail.
  error_code failure = ssl_error("handshake");
  drained_.push_back([this, failure](error_code) {
    auto h = std::move(handshake_done_);
    if (h) h(failure);
  });
  pump();
}

void TlsChannel::async_read_some(uint8_t* buffer, size_t size, IoHandler done) {
  read_buf_ = buffer;
  read_size_ = size;
  read_done_ = std::move(done);
  reading_ = true;
  finish_read();
}

void TlsChannel::finish_read() {
  if (!read_done_) {  // closed while a socket read was pending: nobody waits
    reading_ = false;
    return;
  }
  size_t got = 0;
  bool closed = false;
  bool failed = false;
  while (got < read_size_) {
    ERR_clear_error();
    int n = SSL_read(ssl_, read_buf_ + got, static_cast<int>(read_size_ - got));
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ) break;
    if (err == SSL_ERROR_ZERO_RETURN) closed = true;
    else failed = true;
    break;
  }
  pump();  // SSL_read may have produced records (alerts, key updates)
  if (got > 0 || closed || failed || socket_eof_) {
    reading_ = false;
    auto h = std::move(read_done_);
    error_code ec;
    if (got == 0) ec = failed ? ssl_category_error() : asio::error::make_error_code(asio::error::eof);
    h(ec, got);
    return;
  }
  auto self = shared_from_this();
  fill([this, self](error_code ec) {
    if (ec) socket_eof_ = true;
    finish_read();
  });
}

void TlsChannel::async_write(ByteView data, IoHandler done) {
  size_t size = data.size();
  ERR_clear_error();
  if (!data.empty() && SSL_write(ssl_, data.data(), static_cast<int>(data.size())) <= 0) {
    auto ec = ssl_error("write");
    asio::post(socket_.get_executor(), [done, ec] { done(ec, 0); });
    return;
  }
  drained_.push_back([done, size](error_code ec) { done(ec, ec ? 0 : size); });
  pump();
}

void TlsChannel::async_shutdown(Handler done) {
  ERR_clear_error();
  SSL_shutdown(ssl_);
  drained_.push_back([this, done](error_code ec) {
    close();
    done(ec);
  });
  pump();
}

}  // namespace yonder::link
