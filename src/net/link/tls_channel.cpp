#include "net/link/tls_channel.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace yonder::link {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr size_t kRxBuffer = 256 * 1024;

error_code ssl_category_error() { return asio::error::make_error_code(asio::error::access_denied); }
}  // namespace

// The BIO OpenSSL reads ciphertext from and writes it to: a view of the
// channel's buffers. Reading takes from what the last socket read left
// (nothing there means "retry", as OpenSSL's memory BIO with eof_return -1);
// writing appends to what the next socket write sends.
struct ChannelBio {
  static TlsChannel* channel(BIO* b) { return static_cast<TlsChannel*>(BIO_get_data(b)); }

  static int read(BIO* b, char* out, int size) {
    BIO_clear_retry_flags(b);
    TlsChannel* c = channel(b);
    size_t have = c->rx_end_ - c->rx_begin_;
    if (have == 0 || size <= 0) {
      BIO_set_retry_read(b);
      return -1;
    }
    size_t n = std::min(have, static_cast<size_t>(size));
    std::memcpy(out, c->rx_.data() + c->rx_begin_, n);
    c->rx_begin_ += n;
    return static_cast<int>(n);
  }

  static int write(BIO* b, const char* in, int size) {
    BIO_clear_retry_flags(b);
    if (size <= 0) return 0;
    Bytes& sealed = channel(b)->sealed_;
    const auto* p = reinterpret_cast<const uint8_t*>(in);
    sealed.insert(sealed.end(), p, p + size);
    return size;
  }

  static long ctrl(BIO* b, int cmd, long, void*) {
    switch (cmd) {
      case BIO_CTRL_FLUSH: return 1;  // the socket write is ours to start
      case BIO_CTRL_PENDING: {
        TlsChannel* c = channel(b);
        return static_cast<long>(c->rx_end_ - c->rx_begin_);
      }
      case BIO_CTRL_WPENDING: return static_cast<long>(channel(b)->sealed_.size());
      default: return 0;
    }
  }

  static int create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
  }

  static const BIO_METHOD* method() {
    static BIO_METHOD* m = [] {
      BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "yonder tls channel");
      if (made == nullptr) std::abort();  // out of memory at start-up
      BIO_meth_set_read(made, read);
      BIO_meth_set_write(made, write);
      BIO_meth_set_ctrl(made, ctrl);
      BIO_meth_set_create(made, create);
      return made;
    }();
    return m;
  }

  static BIO* make(TlsChannel* c) {
    BIO* b = BIO_new(method());
    if (b == nullptr) std::abort();  // out of memory
    BIO_set_data(b, c);
    return b;
  }
};

TlsChannel::TlsChannel(asio::ip::tcp::socket socket, SSL_CTX* ctx, bool server)
    : socket_(std::move(socket)), ssl_(SSL_new(ctx)), in_(ChannelBio::make(this)), out_(ChannelBio::make(this)),
      rx_(kRxBuffer) {
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
  if (sealed_.empty()) {
    auto handlers = std::move(drained_);
    drained_.clear();
    for (auto& h : handlers) h(error_code());
    return;
  }
  // The sealed bytes go out as they are; OpenSSL seals the next ones into
  // the other buffer meanwhile (both keep their capacity: no allocation).
  tx_.clear();
  std::swap(tx_, sealed_);
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

// Reads what the socket has into OpenSSL's input, after what it has not
// taken yet (nothing, when it asked for more: it takes all there is).
void TlsChannel::fill(std::function<void(error_code)> then) {
  if (rx_begin_ == rx_end_) {
    rx_begin_ = rx_end_ = 0;
  } else if (rx_begin_ > 0) {
    std::memmove(rx_.data(), rx_.data() + rx_begin_, rx_end_ - rx_begin_);
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
  }
  if (rx_end_ == rx_.size()) rx_.resize(rx_.size() * 2);  // cannot happen: OpenSSL asks only when it took all
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(rx_.data() + rx_end_, rx_.size() - rx_end_),
                          [this, self, then](error_code ec, size_t n) {
                            if (ec) return then(ec);
                            rx_end_ += n;
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
