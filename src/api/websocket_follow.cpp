// add_websocket_follow (api/server.h): a long-poll route served as a
// WebSocket. The long-poll handler stays the one code path that reads logs;
// this only re-dispatches it in-process and forwards each answer.
#include <memory>
#include <nlohmann/json.hpp>

#include "api/server.h"

namespace yonder::api {

namespace {

struct Follow {
  const Router* router = nullptr;
  AuthKind auth = AuthKind::kNone;
  Transport transport = Transport::kTcp;
  std::string poll_path;
  std::map<std::string, std::string> query;  // without offset and wait_ms
  std::string offset = "0";                  // as the client sent it at first: the long-poll route checks it
  int wait_ms = 0;
};

std::string build_query(const Follow& f) {
  std::string q;
  for (const auto& [k, v] : f.query) q += k + "=" + v + "&";
  return q + "offset=" + f.offset + "&wait_ms=" + std::to_string(f.wait_ms);
}

}  // namespace

void add_websocket_follow(Router& router, const std::string& ws_path, const std::string& poll_path, int wait_ms) {
  router.add("GET", ws_path, [poll_path](const Request&, Reply reply) {
    Response r = Response::json(426, {{"error",
                                       {{"code", "upgrade_required"},
                                        {"message",
                                         "this route is a WebSocket (RFC 6455); open it with a "
                                         "WebSocket client, or long-poll GET " +
                                             poll_path}}}});
    r.headers.emplace_back("Upgrade", "websocket");
    reply(std::move(r));
  });
  router.add_websocket(ws_path, [poll_path, wait_ms](const Request& req) -> WsNext {
    auto f = std::make_shared<Follow>();
    f->router = req.router;
    f->auth = req.auth;
    f->transport = req.transport;
    f->poll_path = poll_path;
    f->query = parse_query(req.query);
    f->wait_ms = wait_ms;
    if (auto it = f->query.find("offset"); it != f->query.end()) {
      f->offset = it->second;
      f->query.erase(it);
    }
    f->query.erase("wait_ms");
    return [f](std::function<void(WsMessage)> emit) {
      if (f->router == nullptr) return emit({"{}", true, ws::kCloseInternalError});
      Request sub;
      sub.method = "GET";
      sub.path = f->poll_path;
      sub.query = build_query(*f);
      sub.auth = f->auth;
      sub.transport = f->transport;
      sub.router = f->router;
      f->router->dispatch(sub, [f, emit = std::move(emit)](Response r) {
        WsMessage m;
        m.text = std::move(r.body);
        if (r.status != 200) {
          m.last = true;
          m.close_code = ws::kCloseInternalError;
          return emit(std::move(m));
        }
        auto body = nlohmann::json::parse(m.text, nullptr, false);
        if (!body.is_object() || !body.contains("next_offset") || !body["next_offset"].is_number_unsigned()) {
          m.last = true;
          m.close_code = ws::kCloseInternalError;
          return emit(std::move(m));
        }
        f->offset = std::to_string(body["next_offset"].get<uint64_t>());
        m.last = body.value("ended", false);
        emit(std::move(m));
      });
    };
  });
}

}  // namespace yonder::api
