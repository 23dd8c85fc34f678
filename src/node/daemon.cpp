#include "node/daemon.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/module.h"
#include "api/server.h"
#include "api/tls.h"
#include "config/config.h"
#include "crypto/node_id.h"
#include "gpu/inventory.h"
#include "history/history_service.h"
#include "jobs/audit/audit_routes.h"
#include "jobs/consumer/consumer_jobs.h"
#include "jobs/consumer/remote_consumer.h"
#include "jobs/files/fetch_consumer.h"
#include "jobs/files/fetch_provider.h"
#include "jobs/files/files_consumer.h"
#include "jobs/files/files_provider.h"
#include "jobs/files/upload_provider.h"
#include "jobs/metering/credits.h"
#include "jobs/metering/receipts_consumer.h"
#include "jobs/metering/receipts_provider.h"
#include "jobs/metering/verifications.h"
#include "jobs/provider/provider_service.h"
#include "jobs/provider/remote_provider.h"
#include "jobs/receipts/receipt_store.h"
#include "jobs/sessions/cuda_sessions.h"
#include "jobs/sessions/forward_consumer.h"
#include "jobs/sessions/forward_provider.h"
#include "jobs/sessions/host_forward.h"
#include "mesh/consumer/mesh_benchmark.h"
#include "mesh/consumer/mesh_consumer.h"
#include "mesh/consumer/mesh_opinions.h"
#include "mesh/groups/groups.h"
#include "mesh/jobs/mesh_arrays.h"
#include "mesh/jobs/mesh_jobs.h"
#include "mesh/provider/mesh_provider.h"
#include "net/reach/peer_link.h"
#include "node/logging.h"
#include "node/metrics_routes.h"
#include "os/asio_loop_timers.h"
#include "os/files.h"
#include "os/process.h"
#include "os/terminal.h"
#include "release/version.h"
#include "state/node_state.h"

namespace yonder::node {
namespace asio = boost::asio;

namespace {

int fail(const Error& e) {
  spdlog::error("yonderd cannot start: {}", e.to_string());
  return 1;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "yonder-node";
  return buf;
}

}  // namespace

int run_daemon(const DaemonOptions& options) {
  // Everything the daemon creates is private to its user.
  ::umask(077);
  auto env = config::process_env();
  setup_logging(options.log_format.value_or("auto"), "info");

  auto paths = config::resolve_paths(env);
  if (!paths) return fail(paths.error());
  auto cfg = config::Config::load(paths->config_file);
  if (!cfg) return fail(cfg.error());
  if (auto st = cfg->apply_env(env); !st) return fail(st.error());
  setup_logging(options.log_format.value_or(cfg->get("log.format")), cfg->get("log.level"));

  if (auto st = os::make_dirs(paths->home, 0700); !st) return fail(st.error());
  auto lock = os::FileLock::acquire(paths->lock_file());
  if (!lock) return fail(lock.error());

  auto identity = state::load_identity(*paths, env, os::stderr_is_terminal());
  if (!identity) return fail(identity.error());
  if (auto st = state::prepare_database(paths->database()); !st)
    return fail(Error(st.error()).with_context("state database"));

  auto inventory = gpu::make_inventory(cfg->get("gpu.inventory"));
  if (!inventory) return fail(Error(inventory.error()).with_context("gpu.inventory"));

  std::string name = cfg->get("node.name");
  if (name.empty()) name = host_name();
  std::string node_id = identity->node_id().to_string();
  std::string socket_path = cfg->get("api.socket");
  if (socket_path.empty()) socket_path = paths->default_socket();
  // --- local API access: the token every request needs, the loopback TCP listener.
  // HTTPS on the TCP listener when api.tls_cert/api.tls_key are set (required off loopback).
  std::shared_ptr<api::ApiTls> api_tls;
  if (!cfg->get("api.tls_cert").empty() || !cfg->get("api.tls_key").empty()) {
    auto loaded = api::ApiTls::load(cfg->get("api.tls_cert"), cfg->get("api.tls_key"));
    if (!loaded) return fail(loaded.error());
    api_tls = std::move(*loaded);
  }
  auto api_listen = api::parse_api_listen(cfg->get("api.listen"), api_tls != nullptr);
  if (!api_listen) return fail(api_listen.error());
  auto api_token = api::ensure_api_token(paths->api_token_file(), api::system_random);
  if (!api_token) return fail(api_token.error());
  api::AuthLimits auth_limits;
  auth_limits.login_code_ttl = std::chrono::seconds(cfg->get_int("api.login_code_ttl_s"));
  api::ApiAuth api_auth(std::move(*api_token), paths->api_token_file(), api::system_random, auth_limits);
  // --- end local API access
  auto started = std::chrono::steady_clock::now();
  auto started_wall = std::chrono::system_clock::now();

  asio::io_context io;
  // Blocking work (NVML, SQLite, Docker calls, file writes of uploads, a
  // mesh validator) runs here and posts its result back to `io`. Four
  // threads: most of that work waits on a disk or a socket, and with two a
  // provider under load (bench/load_bench) kept other peers' requests
  // waiting behind submits.
  asio::thread_pool pool(4);
  std::unique_ptr<api::LocalApiServer> server;
  std::unique_ptr<reach::PeerLink> peer_link;
  std::vector<api::Module*> modules;  // the features, in the order they were built
  auto shutdown = [&] {
    spdlog::info("shutting down");
    for (auto m = modules.rbegin(); m != modules.rend(); ++m) (*m)->stop();
    if (server) server->stop();
    if (peer_link) peer_link->stop();
    io.stop();
  };

  // --- peer link: trust store, TLS listener, pairing, peer routes.
  auto created_link = reach::PeerLink::create(io, *identity, *cfg, *paths, name);
  if (!created_link) return fail(Error(created_link.error()).with_context("peer link"));
  peer_link = std::move(*created_link);
  if (auto st = peer_link->start(); !st) return fail(st.error());
  // --- end peer link

  // --- provider executor: Docker executor, job manager, /v1/provider routes.
  auto created_provider = jobs::provider::ProviderService::create(*cfg, *paths, **inventory, node_id);
  if (!created_provider) return fail(Error(created_provider.error()).with_context("provider jobs"));
  std::unique_ptr<jobs::provider::ProviderService> provider = std::move(*created_provider);
  provider->start();  // re-adopts jobs a previous yonderd left running (blocking, before serving)
  // --- end provider executor
  // A start that fails from here on has services whose work may be on the
  // pool: stop them and let that work finish before their destructors run
  // (the pool is destroyed last), as the normal shutdown does.
  auto fail_running = [&](const Error& e) {
    int code = fail(e);
    shutdown();
    pool.join();
    provider->shutdown();
    return code;
  };

  // The GPUs jobs here are placed on (a Slurm provider's: its cluster's),
  // counted at start and again whenever /v1/gpus looks: `share` and
  // `scope` refuse a grant of more GPUs per job than there are.
  gpu::GpuInventory* job_gpus = provider->cluster_inventory();
  if (job_gpus == nullptr) job_gpus = inventory->get();
  auto gpu_count = std::make_shared<std::atomic<int>>(gpu::usable_count(job_gpus->probe()));
  peer_link->set_gpu_count([gpu_count] { return gpu_count->load(); });

  api::Router router;
  peer_link->add_routes(router);
  provider->add_routes(router, io, pool);
  peer_link->set_provider_notice(provider->isolation_notice());
  // --- remote jobs: run.* link methods (provider side), /v1/jobs routes (consumer side).
  jobs::provider::RemoteProvider remote_provider(io, pool, *peer_link, *provider, paths->home + "/uploads");
  auto audit_log = audit::AuditLog::open(paths->database());
  if (!audit_log) return fail_running(audit_log.error());
  remote_provider.set_audit(audit_log->get());
  peer_link->on_trust_event([&remote_provider](const std::string& actor, const std::string& action,
                                               const std::string& subject, nlohmann::json detail) {
    remote_provider.record(actor, action, subject, std::move(detail));
  });
  audit::add_audit_routes(router, io, pool, **audit_log);
  // Workspace uploads: content-addressed, resumable (run.upload tunnels).
  jobs::files::UploadProvider upload_provider(io, pool, *peer_link, remote_provider, *cfg,
                                              paths->home + "/upload-cache", paths->home + "/uploads");
  // Files out of (run.fetch) and into (files.put) jobs' workspaces.
  jobs::files::WorkspaceMounts workspace_mounts(paths->home + "/jobs", [&provider](const JobId& job_id) {
    auto jobs = provider->ready();
    if (!jobs) return false;
    auto view = (*jobs)->get(job_id);
    std::string state = view ? view->value("state", "") : "";
    return state == "starting" || state == "running";
  });
  jobs::files::FetchProvider fetch_provider(io, pool, *peer_link, *provider, remote_provider, workspace_mounts, *cfg);
  jobs::files::FilesProvider files_provider(io, pool, *peer_link, *provider, remote_provider, workspace_mounts, *cfg);
  auto consumer_jobs = jobs::consumer::ConsumerJobStore::open(paths->database());
  if (!consumer_jobs) return fail_running(consumer_jobs.error());
  jobs::consumer::RemoteConsumer remote_consumer(io, pool, *peer_link, std::move(*consumer_jobs),
                                                 paths->home + "/cache/upload-hashes");
  jobs::files::FetchConsumer fetch_consumer(io, pool, *peer_link, remote_consumer.store(), *cfg);
  fetch_consumer.set_transfers(&remote_consumer.transfers());
  jobs::files::FilesConsumer files_consumer(io, pool, *peer_link, remote_consumer.store());
  // Port forwarding: forward.tcp tunnels (provider side), /v1/forwards (consumer side).
  jobs::sessions::ForwardProvider forward_provider(io, pool, *peer_link, *provider, remote_provider);
  forward_provider.set_direct(cfg->get_bool("forward.direct"));
  auto host_ports = jobs::sessions::HostForward::parse_ports(cfg->get("forward.host_ports"));
  if (!host_ports) return fail_running(host_ports.error());
  jobs::sessions::HostForward host_forward(io, *peer_link, remote_provider, std::move(*host_ports));
  jobs::sessions::ForwardConsumer forward_consumer(io, pool, *peer_link, remote_consumer.store());
  // Remote CUDA: cuda.session tunnels to a worker per session (provider side), /v1/cuda/sessions (consumer side).
  jobs::sessions::CudaSessionOptions cuda_options;
  cuda_options.worker = os::private_lib_path("yonder-cuda-worker");
  cuda_options.driver = cfg->get("gpu.cuda_driver");
  cuda_options.vram_guard = cfg->get("gpu.vram_guard");
  if (cuda_options.vram_guard.empty()) cuda_options.vram_guard = os::private_lib_path("libyonder-vram-guard.so");
  cuda_options.run_dir = paths->home + "/cuda";
  cuda_options.socket_dir = std::filesystem::path(socket_path).parent_path();
  jobs::sessions::CudaSessions cuda_sessions(io, *peer_link, remote_provider, std::move(cuda_options));
  // --- end remote jobs
  // --- metering: receipts at every job's end, both sides; credits; tit-for-tat queue order.
  auto receipt_store = jobs::receipts::ReceiptStore::open(paths->database());
  if (!receipt_store) return fail_running(receipt_store.error());
  auto credit_params = jobs::metering::credit_params_from_config(*cfg);
  if (!credit_params) return fail_running(credit_params.error());
  jobs::metering::Credits credits(identity->public_key(), std::move(*credit_params), **receipt_store,
                                  cfg->get_bool("credits.queue_order"));
  jobs::metering::ReceiptsProvider receipts_provider(io, pool, *peer_link, *provider, remote_provider, *identity,
                                                     **receipt_store, credits);
  remote_provider.job_ended().subscribe([&](const nlohmann::json& view) { receipts_provider.on_job_end(view); });
  if (credits.orders_queue()) {
    provider->set_queue_order(
        [&](const std::vector<jobs::provider::ProviderJobs::QueuedJob>& q) { return credits.order(q); });
  }
  // The clock and timers of the services that take them injected (base/loop_timers.h).
  os::AsioLoopTimers loop_timers(io);
  jobs::metering::ReceiptsConsumer receipts_consumer(io, pool.get_executor(), loop_timers, *peer_link, *identity,
                                                     remote_consumer.store(), **receipt_store, credits);
  remote_consumer.job_ended().subscribe([&](const PeerId& provider_id, const JobId& job_id) {
    receipts_consumer.job_ended(provider_id, job_id);
  });
  receipts_consumer.set_sweep_interval(std::chrono::seconds(std::max<int64_t>(0, cfg->get_int("credits.fetch_interval_s"))));
  // --- end metering
  // --- mesh: signed advertisements, leases (provider side), `yonder mesh` and --mesh placement (consumer side).
  auto mesh_settings = mesh::mesh_settings_from_config(*cfg);
  if (!mesh_settings) return fail_running(mesh_settings.error());
  mesh::MeshProvider mesh_provider(io, pool, *peer_link, *provider, **inventory, *identity, *mesh_settings,
                             paths->home + "/mesh-lease-horizon");
  remote_provider.job_ended().subscribe([&](const nlohmann::json& view) { mesh_provider.on_job_end(view); });
  mesh::MeshConsumer mesh_consumer(io, *peer_link, *mesh_settings);
  mesh_consumer.set_credits(&credits);
  remote_provider.job_submitted().subscribe([&] { mesh_provider.changed(); });
  // Mesh jobs (`run --mesh --retries N`): persisted, requeued when a provider is lost, checkpoints synced.
  auto mesh_job_settings = mesh::mesh_job_settings_from_config(*cfg);
  if (!mesh_job_settings) return fail_running(mesh_job_settings.error());
  auto mesh_job_store = mesh::MeshJobStore::open(paths->database());
  if (!mesh_job_store) return fail_running(mesh_job_store.error());
  mesh::ServiceAttempts mesh_attempts(mesh_consumer, remote_consumer, fetch_consumer);
  mesh::MeshJobs mesh_jobs(io, pool.get_executor(), loop_timers, *peer_link, mesh_attempts,
                           std::move(*mesh_job_store), paths->home + "/mesh-jobs", *mesh_job_settings);
  // Array jobs: each task attempt is a mesh job, created, followed and
  // stopped through the supervisor's own calls.
  mesh::MeshJobsRunner array_runner(mesh_jobs);
  auto array_store = mesh::MeshArrayStore::open(paths->database());
  if (!array_store) return fail_running(array_store.error());
  mesh::MeshArrays mesh_arrays(io, pool.get_executor(), loop_timers, array_runner, mesh_attempts,
                               std::move(*array_store));
  // --- end mesh
  // --- groups: signed membership lists in SQLite, invites as share links, gossip on the links.
  auto group_store = mesh::GroupStore::open(paths->database());
  if (!group_store) return fail_running(group_store.error());
  mesh::Groups groups(*peer_link, *identity, name, std::move(*group_store));
  mesh_consumer.set_groups(&groups);  // `run --mesh --group G`, `yonder mesh --group G`
  // The groups' own relays: the link registers with them and its share links carry them.
  groups.relays_changed().subscribe([&](const std::vector<mesh::Groups::GroupRelay>& relays) {
    std::vector<std::pair<LinkRelay, std::string>> named;
    for (const auto& r : relays) named.emplace_back(r.relay, r.group);
    peer_link->use_group_relays(named);
  });
  // --- end groups
  // --- reputation and verification: checks recorded and signed (verifications), mesh.opinions,
  // EigenTrust fed to placement, the known-answer benchmark (`yonder mesh verify`).
  auto verifications = jobs::metering::Verifications::open(paths->database(), *identity);
  if (!verifications) return fail_running(verifications.error());
  mesh_jobs.set_verifications(verifications->get());  // --replicas: who agreed, who was outvoted
  receipts_consumer.set_verifications(verifications->get());  // receipts that disagree with what was seen
  mesh::MeshOpinions mesh_opinions(io, pool, *peer_link, *identity, **receipt_store, **verifications);
  mesh_opinions.set_groups(&groups);
  mesh_consumer.set_opinions(&mesh_opinions);
  mesh_opinions.set_refresh_interval(std::chrono::minutes(5));  // reputation stays current without `yonder mesh`
  auto benchmark_settings = mesh::benchmark_settings_from_config(*cfg);
  if (!benchmark_settings) return fail_running(benchmark_settings.error());
  mesh::MeshBenchmark mesh_benchmark(io, *peer_link, remote_consumer, **verifications, mesh_opinions,
                                     *benchmark_settings);
  groups.member_added().subscribe([&](const mesh::PeerKey& member) { mesh_benchmark.on_member_joined(member); });
  // --- end reputation and verification

  // --- history: what the dashboard charts (GPUs, link throughput, jobs' use), sampled and stored.
  auto history_store = history::HistoryStore::open(paths->database());
  if (!history_store) return fail_running(Error(history_store.error()).with_context("history"));
  history::HistorySources history_sources;
  history_sources.gpus = [job_gpus] { return job_gpus->probe(); };
  history::HistorySettings history_settings;
  history_sources.jobs = [&provider, max_jobs = history_settings.max_jobs] {
    std::vector<history::JobUsage> usage;
    auto jobs = provider->ready();
    if (!jobs) return usage;
    size_t asked = 0;
    for (const JobId& id : (*jobs)->running()) {
      if (asked++ >= max_jobs) break;
      auto stats = (*jobs)->stats(id);
      if (!stats) continue;  // it ended meanwhile
      if (auto u = history::job_usage_from_stats(*stats)) usage.push_back(std::move(*u));
    }
    return usage;
  };
  history_sources.traffic = [&peer_link] {
    std::vector<history::PeerTraffic> traffic;
    for (const auto& session : peer_link->service().sessions()) {
      if (session.established) traffic.push_back({NodeId(session.peer).to_string(), session.bytes_in, session.bytes_out});
    }
    return traffic;
  };
  history_sources.peer_names = [&peer_link] {
    std::map<std::string, std::string> names;
    for (const auto& t : peer_link->targets()) names[t.node_id] = t.name;
    return names;
  };
  history_settings.interval = std::chrono::seconds(std::max<int64_t>(1, cfg->get_int("history.interval_s")));
  history_settings.keep = std::chrono::hours(std::max<int64_t>(1, cfg->get_int("history.keep_h")));
  history::HistoryService history_service(io.get_executor(), pool.get_executor(), loop_timers,
                                          std::move(*history_store), std::move(history_sources), history_settings);
  // --- end history
  // The features, each through the same steps (api/module.h): methods and
  // routes, then start, all before the loop serves anything.
  modules = {&remote_provider, &upload_provider,  &fetch_provider,   &files_provider,    &remote_consumer,
             &fetch_consumer,  &files_consumer,   &forward_provider, &host_forward,      &forward_consumer,
             &receipts_provider, &receipts_consumer, &mesh_provider, &mesh_consumer,     &mesh_jobs,
             &mesh_arrays,     &groups,           &mesh_opinions,    &mesh_benchmark,    &history_service,
             &cuda_sessions};
  for (api::Module* m : modules) {
    m->register_methods();
    m->add_routes(router);
  }
  for (api::Module* m : modules) {
    if (auto st = m->start(); !st) return fail_running(Error(st.error()).with_context(std::string(m->module_name())));
  }
  router.add("GET", "/v1/status", [&](const api::Request&, api::Reply reply) {
    auto uptime = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
    reply(api::Response::json(
        200, {{"node_id", node_id},
              {"name", name},
              {"version", std::string(release::project_version())},
              {"pid", ::getpid()},
              {"uptime_s", uptime.count()},
              {"started_at", std::chrono::duration_cast<std::chrono::seconds>(started_wall.time_since_epoch()).count()},
              {"home", paths->home},
              {"backends", nlohmann::json::array({cfg->get("executor.backend")})},
              {"gpu_inventory", cfg->get("gpu.inventory")},
              {"peers", peer_link->peer_count()},
              {"link_port", peer_link->port()},
              {"api_port", api_auth.tcp_port()},
              {"api_url", api_auth.base_url()}}));
  });
  // Settings applied while running (POST /v1/config/reload), over what
  // `cfg` says: key -> value and its source. Event loop only.
  std::map<std::string, std::pair<std::string, config::Source>> live_values;
  auto running_value = [&](std::string_view key) {
    auto it = live_values.find(std::string(key));
    return it != live_values.end() ? it->second : std::pair{cfg->get(key), cfg->source(key)};
  };
  // The settings this daemon runs with and where each came from, so
  // `yonder config show` reports what runs, not only what the file says now.
  router.add("GET", "/v1/config", [&](const api::Request&, api::Reply reply) {
    nlohmann::json settings = nlohmann::json::array();
    for (const auto& s : config::all_settings()) {
      auto [value, source] = running_value(s.key);
      settings.push_back({{"key", s.key}, {"value", value}, {"source", config::source_name(source)}});
    }
    reply(api::Response::json(200, {{"config_file", paths->config_file}, {"settings", settings}}));
  });
  // Re-reads the file (with the daemon's environment over it, as at start)
  // and applies at once what config::applies_live allows; the rest waits for
  // the next start. `yonder config set` and `unset` call it.
  router.add("POST", "/v1/config/reload", [&](const api::Request&, api::Reply reply) {
    auto fresh = config::Config::load(paths->config_file);
    if (!fresh) return reply(api::Response::error(fresh.error()));
    if (auto st = fresh->apply_env(env); !st) return reply(api::Response::error(st.error()));
    nlohmann::json applied = nlohmann::json::array(), waiting = nlohmann::json::array();
    bool limits = false, order = false;
    for (const auto& s : config::all_settings()) {
      std::string key(s.key), now = running_value(key).first, next = fresh->get(key);
      if (now == next) continue;
      if (!config::applies_live(key)) {
        waiting.push_back({{"key", key}, {"value", next}, {"running", now}});
        continue;
      }
      live_values[key] = {next, fresh->source(key)};
      applied.push_back({{"key", key}, {"value", next}});
      if (key == "log.level") spdlog::set_level(spdlog::level::from_str(next));
      if (key == "history.interval_s") history_service.set_interval(std::chrono::seconds(fresh->get_int(key)));
      limits = limits || key.starts_with("jobs.");
      order = order || key == "credits.queue_order";
    }
    for (const auto& a : applied) spdlog::info("setting {} is now {} (applied live)", a["key"].get<std::string>(), a["value"].get<std::string>());
    // The provider's queue takes its lock: on the pool.
    int max_per_peer = static_cast<int>(fresh->get_int("jobs.max_per_peer")), max_queued = static_cast<int>(fresh->get_int("jobs.max_queued")),
        max_queued_per_peer = static_cast<int>(fresh->get_int("jobs.max_queued_per_peer"));
    bool by_credits = fresh->get_bool("credits.queue_order");
    asio::post(pool, [&io, &provider, &credits, limits, order, max_per_peer, max_queued, max_queued_per_peer, by_credits,
                      body = nlohmann::json{{"applied", applied}, {"restart", waiting}}, reply = std::move(reply)]() mutable {
      if (limits) provider->set_limits(max_per_peer, max_queued, max_queued_per_peer);
      if (order) {
        if (by_credits) {
          provider->set_queue_order(
              [&credits](const std::vector<jobs::provider::ProviderJobs::QueuedJob>& q) { return credits.order(q); });
        } else {
          provider->set_queue_order(nullptr);
        }
      }
      asio::post(io, [body = std::move(body), reply = std::move(reply)] { reply(api::Response::json(200, body)); });
    });
  });
  router.add("GET", "/v1/gpus", [&](const api::Request&, api::Reply reply) {
    asio::post(pool, [&io, shown = job_gpus, gpu_count, reply = std::move(reply)]() mutable {
      auto report = shown->probe();
      gpu_count->store(gpu::usable_count(report));
      asio::post(io, [report = std::move(report), reply = std::move(reply)] {
        reply(api::Response::json(200, gpu::to_json(report)));
      });
    });
  });
  router.add("POST", "/v1/shutdown", [&](const api::Request&, api::Reply reply) {
    spdlog::info("shutdown requested through the local API");
    reply(api::Response::json(200, {{"ok", true}}));
    // Let the reply go out before the loop stops.
    asio::post(io, shutdown);
  });
  add_metrics_routes(router, io, pool, *peer_link, remote_consumer.store());

  server = std::make_unique<api::LocalApiServer>(io, socket_path, std::move(router), api_auth,
                                                 api::ServerLimits{16 * 1024, 1 << 20,
                                                                   static_cast<int>(cfg->get_int("api.request_timeout_s"))});
  if (auto st = server->start(); !st) return fail_running(st.error());
  if (cfg->get_bool("api.group_access")) {  // the .deb's service: members of its group use the CLI
    for (auto [file, mode] : {std::pair{socket_path, 0660}, std::pair{paths->api_token_file(), 0640}}) {
      if (::chmod(file.c_str(), static_cast<mode_t>(mode)) != 0) {
        return fail_running(make_error(ErrorCode::kPermissionDenied, "api.group_access: cannot chmod " + file + ": " +
                                                                 std::strerror(errno)));
      }
    }
  }
  ::unlink(paths->api_url_file().c_str());  // a previous run's, whatever this one listens on
  if (*api_listen) {  // the same API on loopback TCP
    auto port = server->listen_tcp((*api_listen)->host, (*api_listen)->port, api_tls);
    if (!port && cfg->source("api.listen") == config::Source::kDefault &&
        port.error().code() == ErrorCode::kAlreadyExists) {
      // Only the default port, taken (most often another node on this
      // host): any free port instead, said here and written to api-url,
      // which `yonder status`, the dashboard and the Python client read, so
      // none of them sends this node's token to the other node's port.
      // A port the operator chose is theirs: taken, it fails below.
      std::string taken = (*api_listen)->host + ":" + std::to_string((*api_listen)->port);
      port = server->listen_tcp((*api_listen)->host, 0, api_tls);
      if (port) {
        spdlog::warn("{} is taken (another yonderd or program); this node's API is on {} instead (written to {}; "
                     "set api.listen to choose a port)",
                     taken, api_auth.base_url(), paths->api_url_file());
      }
    }
    if (!port) return fail_running(port.error());
    std::ofstream(paths->api_url_file(), std::ios::trunc) << api_auth.base_url() << "\n";
    spdlog::info("API also on {} (token in {})", api_auth.base_url(), paths->api_token_file());
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}", sig);
    shutdown();
  });

  spdlog::info("yonderd {} ready: node {} ({}), API on {}", release::project_version(), node_id, name, socket_path);
  if (options.ready_fd >= 0) {
    [[maybe_unused]] auto n = ::write(options.ready_fd, "ready\n", 6);
    ::close(options.ready_fd);
  }
  io.run();
  pool.join();
  provider->shutdown();  // stops watching jobs; their containers keep running
  server.reset();
  if (api_auth.tcp_port() > 0) ::unlink(paths->api_url_file().c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace yonder::node
