#include "node/metrics_routes.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "api/prometheus.h"
#include "crypto/node_id.h"
#include "exec/executor_metrics.h"
#include "jobs/consumer/consumer_jobs.h"
#include "net/reach/peer_link.h"
#include "release/version.h"

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
  json gpus;  // GET /v1/gpus body (the inventory report), or null
  // Bytes of each link session, from PeerLink's service (io thread).
  struct Traffic {
    std::string peer;
    std::string path_kind;
    uint64_t bytes_in = 0;
    uint64_t bytes_out = 0;
  };
  std::vector<Traffic> traffic;
  std::vector<link::HandshakeCount> handshakes;  // LinkService's counters (io thread)
};

api::Response render(const Scrape& s) {
  api::MetricsText m;
  m.family("yonder_info", "gauge", "yonderd build information (always 1).");
  m.sample("yonder_info", {{"version", std::string(release::project_version())}}, 1);

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

  // Per device, as GET /v1/gpus reports them (a Slurm provider: the cluster's).
  m.family("yonder_gpu_utilization_ratio", "gauge", "GPU utilisation (0-1) per device; absent when not reported.");
  m.family("yonder_gpu_memory_used_bytes", "gauge", "GPU memory in use per device.");
  m.family("yonder_gpu_memory_total_bytes", "gauge", "GPU memory per device.");
  if (s.gpus.is_object() && s.gpus.contains("devices") && s.gpus["devices"].is_array()) {
    for (const auto& d : s.gpus["devices"]) {
      if (!d.is_object()) continue;
      api::Labels labels = {
          {"gpu", std::to_string(d.value("index", 0))}, {"uuid", d.value("uuid", "")}, {"name", d.value("name", "")}};
      int util = d.value("utilization_percent", -1);
      if (util >= 0) m.sample("yonder_gpu_utilization_ratio", labels, util / 100.0);
      m.sample("yonder_gpu_memory_used_bytes", labels, static_cast<double>(d.value("memory_used_bytes", uint64_t{0})));
      m.sample("yonder_gpu_memory_total_bytes", labels,
               static_cast<double>(d.value("memory_total_bytes", uint64_t{0})));
    }
  }

  // Counted per link session, so a path that ended takes its bytes with it.
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> bytes;
  for (const auto& t : s.traffic) {
    auto& b = bytes[{t.peer, t.path_kind}];
    b.first += t.bytes_in;
    b.second += t.bytes_out;
  }
  m.family("yonder_link_received_bytes", "gauge",
           "Bytes received on the link sessions open now, by peer and path kind (a session's count ends with it).");
  for (const auto& [key, b] : bytes) {
    m.sample("yonder_link_received_bytes", {{"peer", key.first}, {"path_kind", key.second}},
             static_cast<double>(b.first));
  }
  m.family("yonder_link_sent_bytes", "gauge", "Bytes sent on the link sessions open now, by peer and path kind.");
  for (const auto& [key, b] : bytes) {
    m.sample("yonder_link_sent_bytes", {{"peer", key.first}, {"path_kind", key.second}}, static_cast<double>(b.second));
  }

  // Link handshakes since yonderd started (net/link/link_service.h, HandshakeCount).
  m.family("yonder_link_handshakes_total", "counter",
           "Link sessions established (TLS, then hello or pairing) since start, by path kind.");
  for (const auto& h : s.handshakes) {
    if (h.outcome == "ok") {
      m.sample("yonder_link_handshakes_total", {{"path_kind", h.path_kind}}, static_cast<double>(h.count));
    }
  }
  m.family("yonder_link_handshake_failures_total", "counter",
           "Link connections that did not become a session since start, by path kind and reason (connect, timeout, "
           "tls, refused, wrong_key, pairing, closed).");
  for (const auto& h : s.handshakes) {
    if (h.outcome != "ok") {
      m.sample("yonder_link_handshake_failures_total", {{"path_kind", h.path_kind}, {"reason", h.outcome}},
               static_cast<double>(h.count));
    }
  }

  // Executor latencies since start (exec/executor_metrics.h); series with no
  // samples yet are exported too, so dashboards see the families at once.
  const exec::ExecutorLatencies& x = exec::executor_latencies();
  m.family("yonder_executor_start_seconds", "histogram",
           "Time of a successful job start in the executor backend, whole (image, workspace, create and start; or "
           "script and sbatch).");
  m.histogram("yonder_executor_start_seconds", {{"backend", "docker"}}, x.docker_task_start.snapshot());
  m.histogram("yonder_executor_start_seconds", {{"backend", "slurm"}}, x.slurm_task_start.snapshot());
  m.family("yonder_executor_container_create_seconds", "histogram",
           "Docker: time of POST /containers/create for a job (image already present).");
  m.histogram("yonder_executor_container_create_seconds", {}, x.container_create.snapshot());
  m.family("yonder_executor_container_start_seconds", "histogram",
           "Docker: time of POST /containers/{id}/start for a job.");
  m.histogram("yonder_executor_container_start_seconds", {}, x.container_start.snapshot());
  m.family("yonder_executor_slurm_submit_seconds", "histogram",
           "Slurm: time sbatch took to accept a job (until it printed the job id).");
  m.histogram("yonder_executor_slurm_submit_seconds", {}, x.slurm_submit.snapshot());
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

void add_metrics_routes(api::Router& router, asio::io_context& io, asio::thread_pool& pool, reach::PeerLink& link,
                        std::shared_ptr<jobs::consumer::ConsumerJobStore> consumer_jobs) {
  router.add("GET", "/metrics", [&io, &pool, &link, consumer_jobs](const api::Request& req, api::Reply reply) {
    auto s = std::make_shared<Scrape>();
    s->relays = link.relay_status();
    s->handshakes = link.service().handshakes();
    for (const auto& session : link.service().sessions()) {
      if (!session.established) continue;
      s->traffic.push_back({NodeId(session.peer).to_string(), session.path.substr(0, session.path.find(' ')),
                            session.bytes_in, session.bytes_out});
    }
    internal_get(req, "/v1/peers", [&io, &pool, consumer_jobs, req, s, reply](api::Response peers) mutable {
      if (peers.status == 200) s->peers = json::parse(peers.body, nullptr, false);
      internal_get(req, "/v1/provider/jobs", [&io, &pool, consumer_jobs, req, s, reply](api::Response jobs) mutable {
        if (jobs.status == 200) s->provider_jobs = json::parse(jobs.body, nullptr, false);
        internal_get(req, "/v1/gpus", [&io, &pool, consumer_jobs, s, reply](api::Response gpus) mutable {
          if (gpus.status == 200) s->gpus = json::parse(gpus.body, nullptr, false);
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
  });
}

}  // namespace yonder::node
