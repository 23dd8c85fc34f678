// WebSocket routes on a real LocalApiServer (loopback TCP, in-process): the
// upgrade goes through the same gate as every request (token or session
// cookie, Origin, Host), add_websocket_follow streams a long-poll route's
// batches and closes when one says "ended", and the connection answers
// pings, echoes close frames and refuses unmasked or oversized frames.
// Every read is bounded by a socket timeout; nothing waits on a clock.
#include <utility>  // before Boost.Asio (GCC 12)

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/auth.h"
#include "api/server.h"
#include "api/websocket.h"
#include "support/temp_dir.h"

namespace yonder::api {
namespace {

using nlohmann::json;

constexpr char kToken[] = "test-token";
constexpr char kKey[] = "dGhlIHNhbXBsZSBub25jZQ==";

class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& bytes) { (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Reads until `n` bytes are buffered; false on EOF or timeout.
  bool fill(size_t n) {
    char buf[4096];
    while (in_.size() < n) {
      ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got <= 0) return false;
      in_.append(buf, static_cast<size_t>(got));
    }
    return true;
  }
  // The HTTP response head; the status code.
  int head() {
    for (;;) {
      size_t end = in_.find("\r\n\r\n");
      if (end != std::string::npos) {
        head_ = in_.substr(0, end + 4);
        in_.erase(0, end + 4);
        return head_.size() > 12 ? std::atoi(head_.substr(9, 3).c_str()) : 0;
      }
      if (!fill(in_.size() + 1)) return 0;
    }
  }
  const std::string& head_text() const { return head_; }
  // One server frame (unmasked, unfragmented): opcode and payload; nullopt at EOF.
  std::optional<std::pair<int, std::string>> frame() {
    if (!fill(2)) return std::nullopt;
    int op = static_cast<uint8_t>(in_[0]) & 0x0F;
    EXPECT_EQ(static_cast<uint8_t>(in_[1]) & 0x80, 0) << "server frames are never masked";
    uint64_t len = static_cast<uint8_t>(in_[1]) & 0x7F;
    size_t hdr = 2;
    if (len == 126) {
      if (!fill(4)) return std::nullopt;
      len = (uint64_t{static_cast<uint8_t>(in_[2])} << 8) | static_cast<uint8_t>(in_[3]);
      hdr = 4;
    } else if (len == 127) {
      if (!fill(10)) return std::nullopt;
      len = 0;
      for (int i = 2; i < 10; ++i) len = (len << 8) | static_cast<uint8_t>(in_[i]);
      hdr = 10;
    }
    if (!fill(hdr + len)) return std::nullopt;
    std::string payload = in_.substr(hdr, len);
    in_.erase(0, hdr + len);
    return std::make_pair(op, payload);
  }
  // True when the server closed the TCP connection (EOF), false on a timeout.
  bool eof() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
  std::string head_;
};

std::string masked(uint8_t op, const std::string& payload, bool mask = true) {
  std::string f;
  f.push_back(static_cast<char>(0x80 | op));
  if (payload.size() < 126) {
    f.push_back(static_cast<char>((mask ? 0x80 : 0) | payload.size()));
  } else {
    f.push_back(static_cast<char>((mask ? 0x80 : 0) | 126));
    f.push_back(static_cast<char>(payload.size() >> 8));
    f.push_back(static_cast<char>(payload.size() & 0xFF));
  }
  const char key[4] = {0x12, 0x34, 0x56, 0x78};
  if (mask) f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i)
    f.push_back(mask ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i]);
  return f;
}

uint16_t close_code(const std::string& payload) {
  if (payload.size() < 2) return 0;
  return static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]));
}

class WebSocketServer : public ::testing::Test {
 protected:
  WebSocketServer() : auth_(kToken, "/nonexistent/api-token", system_random) {
    Router router;
    // A log of three records, one per poll; "ended" with the last.
    router.add("GET", "/poll", [](const Request& req, Reply reply) {
      auto q = parse_query(req.query);
      if (q["id"] != "job1") return reply(Response::error(make_error(ErrorCode::kNotFound, "no job " + q["id"])));
      uint64_t offset = std::stoull(q["offset"]);
      reply(Response::json(200, {{"job_id", "job1"},
                                 {"records", json::array({{{"stream", "stdout"}, {"data", std::to_string(offset)}}})},
                                 {"next_offset", offset + 1},
                                 {"ended", offset + 1 >= 3},
                                 {"auth", req.auth == AuthKind::kToken ? "token" : "session"}}));
    });
    // A log that never grows: the poll is answered only at teardown.
    router.add("GET", "/hang", [this](const Request&, Reply reply) { hung_.push_back(std::move(reply)); });
    add_websocket_follow(router, "/ws", "/poll");
    add_websocket_follow(router, "/ws-hang", "/hang");
    ServerLimits limits;
    limits.max_websocket_frame_bytes = 256;
    server_ = std::make_unique<LocalApiServer>(io_, dir_ / "api.sock", std::move(router), auth_, limits);
    EXPECT_TRUE(server_->start().ok());
    auto port = server_->listen_tcp("127.0.0.1", 0);
    EXPECT_TRUE(port.ok());
    port_ = port ? *port : 0;
    thread_ = std::thread([this] { io_.run(); });
  }
  ~WebSocketServer() override {
    std::promise<void> done;
    boost::asio::post(io_, [this, &done] {
      for (auto& r : hung_) r(Response(200, R"({"records":[],"next_offset":0,"ended":true})"));
      hung_.clear();
      server_->stop();
      done.set_value();
    });
    done.get_future().wait();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  std::string upgrade(const std::string& target, const std::string& extra) const {
    return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
           "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + kKey +
           "\r\n" + extra + "\r\n";
  }
  std::string bearer() const { return std::string("Authorization: Bearer ") + kToken + "\r\n"; }
  std::string origin() const { return "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n"; }
  std::string session_cookie() {
    std::promise<std::string> code;
    boost::asio::post(io_, [&] { code.set_value(auth_.issue_login_code(std::chrono::steady_clock::now())); });
    Client c(port_);
    c.send("GET /login?code=" + code.get_future().get() + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
           "\r\n\r\n");
    EXPECT_EQ(c.head(), 303);
    const std::string& h = c.head_text();
    size_t at = h.find("yonder_session=");
    return "Cookie: " + h.substr(at, h.find(';', at) - at) + "\r\n";
  }

  testing::TempDir dir_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io_.get_executor()};
  ApiAuth auth_;
  std::unique_ptr<LocalApiServer> server_;
  std::vector<Reply> hung_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(WebSocketServer, StreamsEachBatchAndClosesWhenTheLogEnds) {
  Client c(port_);
  ASSERT_TRUE(c.connected());
  c.send(upgrade("/ws?id=job1&offset=0", bearer()));
  ASSERT_EQ(c.head(), 101) << c.head_text();
  EXPECT_NE(c.head_text().find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos)
      << c.head_text();
  for (int i = 0; i < 3; ++i) {
    auto f = c.frame();
    ASSERT_TRUE(f);
    ASSERT_EQ(f->first, 1) << "a text frame";
    auto j = json::parse(f->second);
    EXPECT_EQ(j["records"][0]["data"], std::to_string(i));
    EXPECT_EQ(j["next_offset"], i + 1);
    EXPECT_EQ(j["ended"], i == 2);
    EXPECT_EQ(j["auth"], "token") << "the poll runs under the socket's auth";
  }
  auto close = c.frame();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->first, 8);
  EXPECT_EQ(close_code(close->second), ws::kCloseNormal);
  c.send(masked(8, close->second.substr(0, 2)));
  EXPECT_TRUE(c.eof());
}

TEST_F(WebSocketServer, StartsAtTheOffsetAndReportsErrorsAsTheLastMessage) {
  Client c(port_);
  c.send(upgrade("/ws?id=job1&offset=2", bearer()));
  ASSERT_EQ(c.head(), 101);
  auto f = c.frame();
  ASSERT_TRUE(f);
  EXPECT_EQ(json::parse(f->second)["next_offset"], 3);
  EXPECT_EQ(c.frame()->first, 8);

  Client e(port_);
  e.send(upgrade("/ws?id=nope", bearer()));
  ASSERT_EQ(e.head(), 101);
  auto err = e.frame();
  ASSERT_TRUE(err);
  EXPECT_EQ(json::parse(err->second)["error"]["code"], "not_found");
  auto close = e.frame();
  ASSERT_TRUE(close);
  EXPECT_EQ(close_code(close->second), ws::kCloseInternalError);
}

TEST_F(WebSocketServer, UpgradesPassTheSameGate) {
  auto status = [this](const std::string& req) {
    Client c(port_);
    c.send(req);
    return c.head();
  };
  EXPECT_EQ(status(upgrade("/ws?id=job1", "")), 401);
  EXPECT_EQ(status(upgrade("/ws?id=job1", "Authorization: Bearer wrong\r\n")), 401);
  EXPECT_EQ(status(upgrade("/ws?id=job1", bearer() + "Origin: http://evil.example\r\n")), 403);
  EXPECT_EQ(status(upgrade("/ws?id=job1", bearer() + "Origin: http://127.0.0.1:1\r\n")), 403);
  EXPECT_EQ(status(upgrade("/ws?id=job1", bearer() + "Sec-Fetch-Site: cross-site\r\n")), 403);
  std::string cookie = session_cookie();
  // A cookie rides along by itself: a session's socket must show our Origin.
  EXPECT_EQ(status(upgrade("/ws?id=job1", cookie)), 403);
  EXPECT_EQ(status(upgrade("/ws?id=job1", cookie + "Origin: http://evil.example\r\n")), 403);
  Client ok(port_);
  ok.send(upgrade("/ws?id=job1", cookie + origin()));
  ASSERT_EQ(ok.head(), 101);
  EXPECT_EQ(json::parse(ok.frame()->second)["auth"], "session");
  // Not an upgrade: 426; a bad handshake: 400.
  EXPECT_EQ(status("GET /ws?id=job1 HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + bearer() + "\r\n"),
            426);
  std::string v8 = upgrade("/ws?id=job1", bearer());
  v8.replace(v8.find("Version: 13"), 11, "Version: 8");
  EXPECT_EQ(status(v8), 400);
}

TEST_F(WebSocketServer, AnswersPingsAndClosesOnProtocolErrors) {
  Client c(port_);
  c.send(upgrade("/ws-hang?id=x", bearer()));
  ASSERT_EQ(c.head(), 101);
  c.send(masked(9, "are you there"));
  auto pong = c.frame();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->first, 10);
  EXPECT_EQ(pong->second, "are you there");
  c.send(masked(1, "client text is read and dropped"));
  c.send(masked(9, "still"));
  EXPECT_EQ(c.frame()->second, "still");
  c.send(masked(1, "unmasked", false));
  auto close = c.frame();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->first, 8);
  EXPECT_EQ(close_code(close->second), ws::kCloseProtocolError);

  Client big(port_);
  big.send(upgrade("/ws-hang?id=x", bearer()));
  ASSERT_EQ(big.head(), 101);
  big.send(masked(2, std::string(1000, 'b')));
  auto too_big = big.frame();
  ASSERT_TRUE(too_big);
  EXPECT_EQ(close_code(too_big->second), ws::kCloseTooBig);

  Client polite(port_);
  polite.send(upgrade("/ws-hang?id=x", bearer()));
  ASSERT_EQ(polite.head(), 101);
  polite.send(masked(8, std::string("\x03\xe9", 2)));
  auto echo = polite.frame();
  ASSERT_TRUE(echo);
  EXPECT_EQ(close_code(echo->second), ws::kCloseGoingAway) << "the client's status is echoed";
  EXPECT_TRUE(polite.eof());
}

}  // namespace
}  // namespace yonder::api
