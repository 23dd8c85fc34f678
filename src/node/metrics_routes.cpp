#include "node/metrics_routes.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "api/prometheus.h"
#include "jobs/consumer/consumer_jobs.h"
#include "node/peer_link.h"
#include "node/version.h"

namespace yonder::node {
namespace asio = boost::asio;
using nlohmann::json;

namespace {

struct Scrape {
  json peers;                                // GET /v1/peers body, or null
  json provider_jobs;                        // GET /v1/provider/jobs body (an array), or null
  std::map<std::string, int> consumer_jobs;  // by state
  bool consumer_ok = false;
  json relays;
};

api::Response render(const Scrape& s) {
  api::MetricsText m;
  m.family("yonder_info", "gauge", "yonderd build information (always 1).");
  m.sample("yonder_info", {{"version", kVersion}}, 1);

  std::map<std::string, int> sessions_by_kind;
  int paired = 0, connected = 0;
  if (s.peers.is_object() && s.peers.contains("peers") && s.peers["peers"].is_array()) {
    for (const auto& p : s.peers["peers"]) {
      if (p.value("denied", false)) continue;
      ++paired;
      if (p.value("connected", false)) ++connected;
      for (const auto& path : p.value("paths", json::array())) {
        std::string text = path.value("path", "");
        ++sessions_by_kind[text.substr(0, text.find(' '))];
      }
    }
  }
  m.family("yonder_peers", "gauge", "Paired peers (not denied).");
  m.sample("yonder_peers", {}, paired);
  m.family("yonder_peers_connected", "gauge", "Paired peers with an established link session.");
  m.sample("yonder_peers_connected", {}, connected);
  m.family("yonder_link_sessions", "gauge",
           "Established link sessions by path kind (direct, relay, lan, mapped, ...).");
  for (const auto& [kind, n] : sessions_by_kind) m.sample("yonder_link_sessions", {{"path_kind", kind}}, n);
  m.family("yonder_peer_rtt_seconds", "gauge", "Round-trip time of each connected peer's current path.");
  if (s.peers.is_object() && s.peers.contains("peers") && s.peers["peers"].is_array()) {
    for (const auto& p : s.peers["peers"]) {
      if (!p.contains("rtt_ms") || !p["rtt_ms"].is_number()) continue;
      m.sample(
          "yonder_peer_rtt_seconds",
          {{"peer", p.value("node_id", "")}, {"name", p.value("name", "")}, {"path_kind", p.value("path_kind", "")}},
          p["rtt_ms"].get<double>() / 1000.0);
    }
  }

  m.family("yonder_provider_jobs", "gauge", "Jobs this node runs for peers, by state (as a provider).");
  if (s.provider_jobs.is_array()) {
    std::map<std::string, int> by_state;
    for (const auto& j : s.provider_jobs) ++by_state[j.value("state", "unknown")];
    for (const auto& [state, n] : by_state) m.sample("yonder_provider_jobs", {{"state", state}}, n);
  }
  m.family("yonder_consumer_jobs", "gauge", "Jobs this node submitted to providers, by last known state.");
  for (const auto& [state, n] : s.consumer_jobs) m.sample("yonder_consumer_jobs", {{"state", state}}, n);

  m.family("yonder_relay_registrations", "gauge",
           "Relays this node keeps (link.relays and providers' relays), by state.");
  std::map<std::string, int> relays;
  if (s.relays.is_array()) {
    for (const auto& r : s.relays) ++relays[r.value("state", "unknown")];
  }
  for (const auto& [state, n] : relays) m.sample("yonder_relay_registrations", {{"state", state}}, n);
  return m.response();
}

// GETs `path` through the router that is serving the scrape, in-process.
void internal_get(const api::Request& outer, const std::string& path, std::function<void(api::Response)> done) {
  if (outer.router == nullptr) return done(api::Response(503, "{}"));
  api::Request sub;
  sub.method = "GET";
  sub.path = path;
  sub.auth = outer.auth;
  sub.router = outer.router;
  outer.router->dispatch(sub, std::move(done));
}

}  // namespace

void add_metrics_routes(api::Router& router, asio::io_context& io, asio::thread_pool& pool, PeerLink& link,
                        std::shared_ptr<jobs::consumer::ConsumerJobStore> consumer_jobs) {
  router.add("GET", "/metrics", [&io, &pool, &link, consumer_jobs](const api::Request& req, api::Reply reply) {
    auto s = std::make_shared<Scrape>();
    s->relays = link.relay_status();
    internal_get(req, "/v1/peers", [&io, &pool, consumer_jobs, req, s, reply](api::Response peers) mutable {
      if (peers.status == 200) s->peers = json::parse(peers.body, nullptr, false);
      internal_get(req, "/v1/provider/jobs", [&io, &pool, consumer_jobs, s, reply](api::Response jobs) mutable {
        if (jobs.status == 200) s->provider_jobs = json::parse(jobs.body, nullptr, false);
        asio::post(pool, [&io, consumer_jobs, s, reply]() mutable {
          if (consumer_jobs) {
            if (auto list = consumer_jobs->list()) {
              for (const auto& j : *list) ++s->consumer_jobs[j.state.empty() ? "unknown" : j.state];
            }
          }
          asio::post(io, [s, reply] { reply(render(*s)); });
        });
      });
    });
  });
}

}  // namespace yonder::node
