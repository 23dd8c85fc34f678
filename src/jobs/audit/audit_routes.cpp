#include "jobs/audit/audit_routes.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <charconv>
#include <nlohmann/json.hpp>

namespace yonder::audit {
namespace asio = boost::asio;
namespace {

constexpr int64_t kDefaultLimit = 100;
constexpr int64_t kMaxLimit = 100000;

// The value of `key` in a raw query string ("a=1&b=2"), or "".
std::string query_value(const std::string& query, const std::string& key) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string part = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (part.rfind(key + "=", 0) == 0) return part.substr(key.size() + 1);
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return "";
}

Result<nlohmann::json> audit_reply(audit::AuditLog& audit, int64_t limit, bool verify) {
  auto entries = audit.list(limit);
  if (!entries) return std::move(entries).error();
  nlohmann::json out = {{"entries", nlohmann::json::array()}};
  for (const auto& e : *entries) out["entries"].push_back(e.to_json());
  if (verify) {
    auto report = audit.verify();
    if (!report) return std::move(report).error();
    nlohmann::json v = {{"ok", !report->first_bad_seq.has_value()},
                        {"entries", report->entries},
                        {"head_hash", report->head_hash},
                        {"gaps", report->gaps}};
    if (report->first_bad_seq) {
      v["first_bad_seq"] = *report->first_bad_seq;
      v["problem"] = report->problem;
    }
    out["verify"] = v;
  }
  return out;
}

}  // namespace

void add_audit_routes(api::Router& router, asio::io_context& io, asio::thread_pool& pool, audit::AuditLog& audit) {
  router.add("GET", "/v1/audit", [&io, &pool, &audit](const api::Request& req, api::Reply reply) {
    int64_t limit = kDefaultLimit;
    std::string text = query_value(req.query, "limit");
    if (!text.empty()) {
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
      if (ec != std::errc() || p != text.data() + text.size() || limit < 0 || limit > kMaxLimit) {
        return reply(api::Response::error(make_error(
            ErrorCode::kInvalidArgument, "'limit' must be an integer from 0 to " + std::to_string(kMaxLimit))));
      }
    }
    bool verify = query_value(req.query, "verify") == "1";
    asio::post(pool, [&io, &audit, limit, verify, reply = std::move(reply)]() mutable {
      auto r = audit_reply(audit, limit, verify);
      asio::post(io, [r = std::move(r), reply = std::move(reply)]() mutable {
        reply(r ? api::Response::json(200, *r) : api::Response::error(r.error()));
      });
    });
  });
}

}  // namespace yonder::audit
