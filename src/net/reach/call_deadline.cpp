#include "net/reach/call_deadline.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>

namespace yonder::reach {

void call_with_deadline(boost::asio::io_context& io, link::LinkService& service, const Peers::Target& t,
                        const std::string& method, const nlohmann::json& params, std::chrono::milliseconds deadline,
                        std::function<void(Result<nlohmann::json>)> done) {
  struct Once {
    explicit Once(boost::asio::io_context& c) : timer(c) {}
    boost::asio::steady_timer timer;
    std::function<void(Result<nlohmann::json>)> done;
  };
  auto once = std::make_shared<Once>(io);
  once->done = std::move(done);
  auto finish = [once](Result<nlohmann::json> r) {
    if (!once->done) return;
    auto d = std::move(once->done);
    once->done = nullptr;
    once->timer.cancel();
    d(std::move(r));
  };
  once->timer.expires_after(deadline);
  once->timer.async_wait([finish, name = t.name, method, deadline](boost::system::error_code ec) {
    if (ec) return;
    finish(make_error(ErrorCode::kUnavailable,
                      "provider \"" + name.substr(0, 64) + "\" did not answer " + method + " within " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(deadline).count()) +
                          " s (it may be stopped or overloaded)"));
  });
  service.call(t.key, t.addresses, method, params, finish);
}

}  // namespace yonder::reach
