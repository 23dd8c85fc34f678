// Upload requests: a request with a byte body, for workspace uploads. The
// caller opens a stream of kind kUpload and writes one request message
// ({"method", "params"}, as on an RPC stream), then the raw body, then
// half-closes. The acceptor authorises the method against the caller's
// current scope and rate budget exactly like an RPC, hands the body to the
// handler's sink as it arrives, and answers with one message ({"result"} or
// {"error", "code"}) and closes. It may answer early with an error (a limit
// was hit); the caller then stops sending, and bytes still in flight are
// dropped. Bulk bytes never pass through JSON; flow control is the mux's
// per-stream window, and the caller asks its source for the next chunk only
// once the previous one has been taken.
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "net/link/link_service_impl.h"

namespace yonder::link {
namespace {

constexpr size_t kReadChunk = 256 * 1024;

wire::StreamId sid(uint32_t id) { return wire::StreamId{id}; }

Error reply_error(const nlohmann::json& m) {
  std::string name = m.value("code", "");
  ErrorCode code = name == "permission_denied"    ? ErrorCode::kPermissionDenied
                   : name == "not_found"          ? ErrorCode::kNotFound
                   : name == "resource_exhausted" ? ErrorCode::kResourceExhausted
                   : name == "unavailable"        ? ErrorCode::kUnavailable
                                                  : ErrorCode::kFailedPrecondition;
  return make_error(code, m["error"].get<std::string>());
}

}  // namespace

void LinkService::add_upload_method(const std::string& method, UploadHandler handler) {
  impl_->upload_methods[method] = std::move(handler);
}

void LinkService::Impl::answer_upload(Conn& c, uint32_t id, Result<nlohmann::json> r) {
  auto it = c.streams.find(id);
  if (it == c.streams.end() || it->second.answered) return;
  it->second.answered = true;
  it->second.sink.reset();
  nlohmann::json msg = r ? nlohmann::json{{"result", *r}}
                         : nlohmann::json{{"error", r.error().message()}, {"code", error_code_name(r.error().code())}};
  send(c, id, encode_message(msg), true);
}

void LinkService::Impl::on_upload_data(Conn& c, uint32_t id) {
  Mux& mux = c.session->mux();
  while (mux.readable(sid(id)) > 0) {
    auto it = c.streams.find(id);
    if (it == c.streams.end()) {
      (void)mux.read(sid(id));
      break;
    }
    StreamState& st = it->second;
    Bytes b = mux.read(sid(id), kReadChunk);
    if (st.answered) continue;  // refused early: drop what is still coming
    if (!st.sink) {
      st.upload_head.insert(st.upload_head.end(), b.begin(), b.end());
      if (st.upload_head.size() < 4) continue;
      size_t len = 0;
      for (int i = 0; i < 4; ++i) len = (len << 8) | st.upload_head[static_cast<size_t>(i)];
      if (len > kMaxMessageBytes) {
        (void)mux.reset(sid(id), wire::ResetCode::kProtocolError, "upload request too large");
        c.streams.erase(it);
        break;
      }
      if (st.upload_head.size() < 4 + len) continue;
      auto request = nlohmann::json::parse(st.upload_head.begin() + 4, st.upload_head.begin() + 4 + static_cast<long>(len),
                                           nullptr, false);
      Bytes rest(st.upload_head.begin() + 4 + static_cast<long>(len), st.upload_head.end());
      st.upload_head.clear();
      st.upload_head.shrink_to_fit();
      if (!request.is_object() || !request.contains("method") || !request["method"].is_string()) {
        (void)mux.reset(sid(id), wire::ResetCode::kProtocolError, "malformed upload request");
        c.streams.erase(it);
        break;
      }
      std::string method = request["method"];
      PublicKeyBytes peer = c.session->peer();
      if (!take_token(c)) {
        answer_upload(c, id, make_error(ErrorCode::kResourceExhausted, "too many requests from this node; slow down"));
        continue;
      }
      if (auto ok = policy.authorize(peer, method); !ok) {
        answer_upload(c, id, std::move(ok).error());
        continue;
      }
      auto handler = upload_methods.find(method);
      if (handler == upload_methods.end()) {
        answer_upload(c, id, make_error(ErrorCode::kInvalidArgument, "the provider does not support uploads for \"" +
                                                                         method.substr(0, 64) + "\" (is it an older yonder?)"));
        continue;
      }
      auto sink = handler->second(peer, request.contains("params") ? request["params"] : nlohmann::json::object());
      if (!sink) {
        answer_upload(c, id, std::move(sink).error());
        continue;
      }
      st.sink = std::move(*sink);
      b = std::move(rest);
    }
    if (!b.empty()) {
      if (auto w = st.sink->write(b); !w) answer_upload(c, id, std::move(w).error());
    }
  }
  c.session->flush();
}

void LinkService::Impl::on_upload_closed(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  StreamState& st = it->second;
  if (!st.answered) {
    if (!st.sink) {
      (void)c.session->mux().reset(sid(id), wire::ResetCode::kProtocolError, "upload ended before its request");
    } else {
      auto r = st.sink->finish();
      answer_upload(c, id, std::move(r));
    }
  }
  c.streams.erase(id);
  c.session->flush();
}

void LinkService::upload(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                         const std::string& method, const nlohmann::json& params, UploadSource source,
                         std::function<void(Result<nlohmann::json>)> done) {
  Impl* impl = impl_.get();
  impl->with_session(peer, addresses, [impl, method, params, source, done](Result<Conn*> conn) {
    if (!conn) return done(std::move(conn).error());
    Conn& c = **conn;
    auto id = impl->open(c, AppStreamKind::kUpload);
    if (!id) return done(std::move(id).error());
    struct Upload {
      bool finished = false, asking = false, eof = false;
      MessageReader reader;
      std::function<void(Result<nlohmann::json>)> done;
    };
    auto up = std::make_shared<Upload>();
    up->done = done;
    auto finish = [up](Result<nlohmann::json> r) {
      if (up->finished) return;
      up->finished = true;
      auto d = std::move(up->done);
      d(std::move(r));
    };
    std::weak_ptr<Session> weak = c.session;
    uint32_t stream = *id;
    // Stops sending (the upload failed on our side, or the provider refused
    // it). Posted: it erases the stream whose callback may be running.
    auto cancel = [impl, weak, stream](const std::string& why) {
      asio::post(impl->io, [impl, weak, stream, why] {
        auto s = weak.lock();
        Conn* cc = s ? impl->conn_of(s) : nullptr;
        if (cc == nullptr || !cc->streams.count(stream)) return;
        cc->streams.erase(stream);
        (void)s->mux().reset(sid(stream), wire::ResetCode::kCancel, why);
        s->flush();
      });
    };
    StreamState& st = c.streams[stream];
    st.on_writable = [impl, weak, stream, up, source, finish, cancel]() {
      if (up->asking || up->eof || up->finished) return;
      up->asking = true;
      source([impl, weak, stream, up, finish, cancel](Result<Bytes> chunk) {
        up->asking = false;
        auto s = weak.lock();
        Conn* cc = s ? impl->conn_of(s) : nullptr;
        if (cc == nullptr || up->finished || !cc->streams.count(stream)) return;  // on_end reported it
        if (!chunk) {
          cancel("the sender failed: " + chunk.error().message());
          return finish(std::move(chunk).error());
        }
        up->eof = chunk->empty();
        impl->send(*cc, stream, *chunk, up->eof);
      });
    };
    st.on_data = [up, finish, cancel](StreamState&, ByteView b) {
      up->reader.feed(b);
      auto msg = up->reader.next();
      if (!msg) return finish(std::move(msg).error());
      if (!*msg) return;
      const nlohmann::json& m = **msg;
      if (m.contains("error") && m["error"].is_string()) {
        Error e = reply_error(m);
        if (!up->eof) cancel("refused");
        return finish(std::move(e));
      }
      finish(m.contains("result") ? m["result"] : nlohmann::json::object());
    };
    st.on_end = [finish](const std::string& why) {
      finish(make_error(ErrorCode::kUnavailable, "the upload stream ended: " + why));
    };
    st.on_remote_close = [finish] {
      finish(make_error(ErrorCode::kUnavailable, "the provider closed the upload without a reply"));
    };
    impl->send(c, stream, encode_message({{"method", method}, {"params", params}}), false);
  });
}

}  // namespace yonder::link
