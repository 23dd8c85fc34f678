#include "mesh/provider/mesh_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <chrono>
#include <fstream>
#include <spdlog/spdlog.h>

#include "jobs/provider/provider_jobs.h"
#include "mesh/core/capacity.h"
#include "mesh/core/lease.h"

namespace yonder::mesh {
namespace asio = boost::asio;

namespace {

constexpr size_t kEndedKept = 256;

bool finished_state(const std::string& s) { return s == "exited" || s == "stopped" || s == "failed"; }

Result<uint64_t> positive(const config::Config& cfg, const char* key, uint64_t max) {
  int64_t v = cfg.get_int(key);
  if (v <= 0 || static_cast<uint64_t>(v) > max) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(key) + " must be between 1 and " + std::to_string(max) + "; fix it in config.toml");
  }
  return static_cast<uint64_t>(v);
}

}  // namespace

Result<MeshSettings> mesh_settings_from_config(const config::Config& cfg) {
  MeshSettings s;
  auto labels = mesh::parse_labels(cfg.get("mesh.labels"));
  if (!labels) return Error(labels.error()).with_context("mesh.labels");
  s.labels = std::move(*labels);
  auto term = positive(cfg, "mesh.lease_term_s", mesh::kMaxLeaseTermMs / 1000);
  if (!term) return std::move(term).error();
  s.lease_term_ms = *term * 1000;
  auto offer = positive(cfg, "mesh.offer_timeout_ms", 600'000);
  if (!offer) return std::move(offer).error();
  s.offer_timeout_ms = *offer;
  auto ttl = positive(cfg, "mesh.advertisement_ttl_s", mesh::kMaxAdvertisementTtlMs / 1000);
  if (!ttl) return std::move(ttl).error();
  s.advertisement_ttl_ms = *ttl * 1000;
  int64_t push = cfg.get_int("mesh.advertisement_push_s");
  if (push < 0 || push > 86'400) {
    return make_error(ErrorCode::kInvalidArgument,
                      "mesh.advertisement_push_s must be between 0 (no pushes) and 86400; fix it in config.toml");
  }
  s.advertisement_push_ms = static_cast<uint64_t>(push) * 1000;
  s.backend = cfg.get("executor.backend");
  return s;
}

MeshProvider::MeshProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                           jobs::provider::ProviderService& provider, gpu::GpuInventory& inventory,
                           const Identity& identity, MeshSettings settings, std::string horizon_file)
    : io_(io),
      pool_(pool),
      link_(link),
      provider_(provider),
      inventory_(inventory),
      identity_(identity),
      settings_(std::move(settings)),
      horizon_file_(std::move(horizon_file)),
      book_(static_cast<uint32_t>(mesh::kMaxGpusPerProvider)) {}

MeshProvider::~MeshProvider() {
  *alive_ = false;
  for (auto* t : {debounce_.get(), periodic_.get()}) {
    if (t != nullptr) t->cancel();
  }
}

mesh::UnixMs MeshProvider::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status MeshProvider::start() {
  std::ifstream in(horizon_file_);
  std::string text;
  std::getline(in, text);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || v <= 0 || v > mesh::kMaxUnixMs) return ok_status();
  horizon_ms_ = v;
  if (v > now_ms()) {
    hold_until_ms_ = v;
    spdlog::info("mesh: a previous run may have leased devices until {} ms from now; no new leases until then",
                 v - now_ms());
  }
  return ok_status();
}

void MeshProvider::with_devices(std::function<void(Result<Devices>)> then) {
  asio::post(pool_, [this, alive = alive_, then = std::move(then)]() mutable {
    auto result = [&]() -> Result<Devices> {
      auto jobs = provider_.ready();
      if (!jobs) {
        return Error(jobs.error()).with_context("this node runs no jobs now, so it offers no GPUs");
      }
      gpu::GpuInventory* shown = provider_.cluster_inventory();
      if (shown == nullptr) shown = &inventory_;
      gpu::InventoryReport report = shown->probe();
      nlohmann::json status = (*jobs)->executor_status();
      std::set<std::string> held;
      // Leased whole, or shared: either way not free for a whole-GPU job.
      for (const char* key : {"leases", "shares"}) {
        if (!status.contains(key) || !status[key].is_object()) continue;
        for (auto it = status[key].begin(); it != status[key].end(); ++it) held.insert(it.key());
      }
      Devices d;
      d.queued = status.value("queued", uint32_t{0});
      for (const auto& dev : report.devices) {
        if (d.gpus.size() >= mesh::kMaxGpusPerProvider) break;
        mesh::GpuOffer g;
        g.model = dev.name.substr(0, 64);
        if (g.model.empty()) g.model = "unknown";
        g.memory_bytes = dev.memory_total_bytes;
        g.cuda_major = static_cast<uint32_t>(std::clamp(dev.compute_major, 0, 99));
        g.cuda_minor = static_cast<uint32_t>(std::clamp(dev.compute_minor, 0, 99));
        g.driver = report.driver_version.substr(0, 32);
        g.leased = held.count(dev.uuid) > 0;
        d.gpus.push_back(std::move(g));
      }
      return d;
    }();
    asio::post(io_, [alive, then = std::move(then), result = std::move(result)]() mutable {
      if (*alive) then(std::move(result));
    });
  });
}

void MeshProvider::collect(mesh::UnixMs now) {
  for (const auto& g : book_.expire(now)) {
    spdlog::info("mesh: lease {} of {} expired (devices freed)", g.lease_id, NodeId(g.consumer).to_string());
    changed();
    if (auto b = bound_.find(g.lease_id); b != bound_.end()) {
      lease_of_job_.erase(b->second);
      bound_.erase(b);
    }
  }
}

void MeshProvider::advertise(std::function<void(Result<mesh::Advertisement>)> then) {
  with_devices([this, then = std::move(then)](Result<Devices> d) {
    if (!d) return then(std::move(d).error());
    mesh::UnixMs now = now_ms();
    collect(now);
    mesh::Advertisement ad;
    ad.gpus = std::move(d->gpus);
    for (uint32_t i = 0; i < ad.gpus.size(); ++i) {
      if (now < hold_until_ms_ || !book_.device_free(i, now)) ad.gpus[i].leased = true;
    }
    ad.queue_depth = std::min<uint32_t>(d->queued, 1'000'000);
    if (!settings_.backend.empty() && settings_.backend != "none") ad.backends.push_back(settings_.backend);
    ad.labels = settings_.labels;
    ad.issued_at_ms = now;
    ad.expires_at_ms = now + static_cast<mesh::UnixMs>(settings_.advertisement_ttl_ms);
    mesh::sign_advertisement(ad, identity_);
    then(std::move(ad));
  });
}

void MeshProvider::changed() {
  if (settings_.advertisement_push_ms == 0) return;
  asio::post(io_, [this, alive = alive_] {
    if (!*alive || push_pending_) return;
    push_pending_ = true;
    push_later(std::chrono::seconds(1), false);
  });
}

void MeshProvider::push_later(std::chrono::milliseconds after, bool periodic) {
  auto& timer = periodic ? periodic_ : debounce_;
  if (!timer) timer = std::make_unique<asio::steady_timer>(io_);
  timer->expires_after(after);
  timer->async_wait([this, alive = alive_, periodic](boost::system::error_code ec) {
    if (ec || !*alive) return;
    if (periodic) {
      push_later(std::chrono::milliseconds(settings_.advertisement_push_ms), true);
    } else {
      push_pending_ = false;
    }
    push_now();
  });
}

void MeshProvider::push_now() {
  // Peers granted `mesh` with a session up now; the others pull when they look.
  std::set<PublicKeyBytes> online;
  for (const auto& s : link_.service().sessions()) {
    if (s.established && !s.draining) online.insert(s.peer);
  }
  std::vector<reach::Peers::Target> to;
  for (auto& t : link_.targets()) {
    auto grant = link_.grant_of(t.key);
    if (grant && grant->allows(Capability::kMesh) && online.count(t.key)) to.push_back(std::move(t));
  }
  if (to.empty()) return;
  advertise([this, to = std::move(to)](Result<mesh::Advertisement> ad) {
    if (!ad) return spdlog::debug("mesh: no advertisement to push: {}", ad.error().message());
    nlohmann::json params = {{"advertisement", mesh::encode_advertisement(*ad)}};
    for (const auto& t : to) {
      link_.service().call(t.key, t.addresses, "advertisement.push", params, [name = t.name](Result<nlohmann::json> r) {
        if (!r) spdlog::debug("mesh: pushing the advertisement to {}: {}", name, r.error().message());
      });
    }
  });
}

void MeshProvider::register_methods() {
  link::LinkService& service = link_.service();
  service.add_method("mesh.advertisement", [this](const PublicKeyBytes&, const nlohmann::json&, link::RpcReply reply) {
    advertise([reply = std::move(reply)](Result<mesh::Advertisement> ad) {
      if (!ad) return reply(std::move(ad).error());
      reply(nlohmann::json{{"advertisement", mesh::encode_advertisement(*ad)}});
    });
  });
  if (settings_.advertisement_push_ms > 0) {
    push_later(std::chrono::milliseconds(settings_.advertisement_push_ms), true);
  }
  service.add_method("mesh.lease", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                          link::RpcReply reply) {
    if (!params.is_object() || !params.contains("message") || !params["message"].is_string()) {
      return reply(make_error(ErrorCode::kInvalidArgument, "mesh.lease needs {\"message\": \"<lease message>\"}"));
    }
    auto m = mesh::decode_lease_message(params["message"].get_ref<const std::string&>());
    if (!m) return reply(std::move(m).error());
    answer(peer, *m, std::move(reply));
  });
  service.add_method("mesh.bind", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                         link::RpcReply reply) { bind(peer, params, std::move(reply)); });
}

void MeshProvider::answer(const PublicKeyBytes& peer, const mesh::LeaseMessage& m, link::RpcReply reply) {
  std::string who = NodeId(peer).to_string();
  auto send = [reply](const mesh::LeaseMessage& out) {
    reply(nlohmann::json{{"message", mesh::encode_lease_message(out)}});
  };
  switch (m.kind) {
    case mesh::LeaseKind::kOffer: {
      with_devices([this, peer, who, m, send, reply](Result<Devices> d) {
        if (!d) return reply(std::move(d).error());
        mesh::UnixMs now = now_ms();
        collect(now);
        mesh::LeaseMessage offer = m;
        offer.term_ms = std::min<uint64_t>(offer.term_ms == 0 ? settings_.lease_term_ms : offer.term_ms,
                                           settings_.lease_term_ms);
        if (now < hold_until_ms_) {
          mesh::LeaseMessage out;
          out.kind = mesh::LeaseKind::kRefuse;
          out.request_id = m.request_id;
          out.refuse_reason = mesh::RefuseReason::kBusy;
          out.retry_after_ms = static_cast<uint64_t>(hold_until_ms_ - now);
          return send(out);
        }
        mesh::LeaseMessage out = mesh::answer_offer(book_, d->gpus, peer, offer, now);
        if (out.kind != mesh::LeaseKind::kAccept) {
          spdlog::info("mesh: offer {} from {} for {} GPU(s) refused ({})", m.request_id, who, m.gpus,
                       out.refuse_reason == mesh::RefuseReason::kBusy ? "busy" : "infeasible");
          return send(out);
        }
        spdlog::info("mesh: lease {} to {}: {} device(s) until {}", out.lease_id, who, out.devices.size(),
                     out.expires_at_ms);
        // On disk before the accept leaves, so a restart cannot hand the devices out again.
        raise_horizon(out.expires_at_ms, [send, out] { send(out); });
        changed();
      });
      return;
    }
    case mesh::LeaseKind::kRenew: {
      mesh::UnixMs now = now_ms();
      collect(now);
      if (bound_.count(m.lease_id)) {  // lasts as long as its job; nothing to extend
        auto it = book_.leases().find(m.lease_id);
        if (it == book_.leases().end() || it->second.consumer != peer) {
          return reply(make_error(ErrorCode::kNotFound, "no lease " + std::to_string(m.lease_id) + " of yours here"));
        }
        mesh::LeaseMessage out;
        out.kind = mesh::LeaseKind::kAccept;
        out.lease_id = m.lease_id;
        out.devices = it->second.devices;
        out.expires_at_ms = it->second.expires_at_ms;
        return send(out);
      }
      auto g = book_.renew(m.lease_id, peer, std::min<uint64_t>(m.term_ms, settings_.lease_term_ms), now);
      if (!g) return reply(std::move(g).error());
      mesh::LeaseMessage out;
      out.kind = mesh::LeaseKind::kAccept;
      out.lease_id = g->lease_id;
      out.devices = g->devices;
      out.expires_at_ms = g->expires_at_ms;
      raise_horizon(out.expires_at_ms, [send, out] { send(out); });
      return;
    }
    case mesh::LeaseKind::kRelease: {
      auto st = book_.release(m.lease_id, peer);
      if (st) {
        spdlog::info("mesh: lease {} released by {}", m.lease_id, who);
        changed();
        if (auto b = bound_.find(m.lease_id); b != bound_.end()) {
          lease_of_job_.erase(b->second);
          bound_.erase(b);
        }
      }
      return reply(nlohmann::json{{"released", st.ok()}});
    }
    default:
      return reply(make_error(ErrorCode::kInvalidArgument, "mesh.lease takes an offer, a renew or a release"));
  }
}

void MeshProvider::bind(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
  if (!params.is_object() || !params.contains("lease_id") || !params["lease_id"].is_number_unsigned() ||
      !params.contains("job_id") || !params["job_id"].is_string() || params["job_id"].get_ref<const std::string&>().empty() ||
      params["job_id"].get_ref<const std::string&>().size() > 64) {
    return reply(make_error(ErrorCode::kInvalidArgument, "mesh.bind needs {\"lease_id\": N, \"job_id\": \"...\"}"));
  }
  uint64_t lease_id = params["lease_id"].get<uint64_t>();
  std::string job_id = params["job_id"].get<std::string>();
  std::string peer_id = NodeId(peer).to_string();
  asio::post(pool_, [this, alive = alive_, peer, peer_id, lease_id, job_id, reply = std::move(reply)]() mutable {
    // The job must be the caller's; its state decides whether the lease still matters.
    Result<std::string> state = [&]() -> Result<std::string> {
      auto jobs = provider_.ready();
      if (!jobs) return std::move(jobs).error();
      auto view = (*jobs)->get(JobId(job_id));
      if (!view || view->value("peer_id", "") != peer_id) {
        return make_error(ErrorCode::kNotFound, "no job " + job_id + " of yours on this provider");
      }
      return view->value("state", "");
    }();
    asio::post(io_, [this, alive, peer, lease_id, job_id, state = std::move(state), reply = std::move(reply)]() mutable {
      if (!*alive) return;
      if (!state) return reply(std::move(state).error());
      mesh::UnixMs now = now_ms();
      collect(now);
      auto it = book_.leases().find(lease_id);
      if (it == book_.leases().end() || it->second.consumer != peer) {
        return reply(make_error(ErrorCode::kNotFound, "lease " + std::to_string(lease_id) +
                                                          " is not yours or has expired; ask for a new one"));
      }
      if (finished_state(*state) || ended_.count(job_id)) {
        (void)book_.release(lease_id, peer);
        return reply(nlohmann::json{{"bound", false}, {"released", true}});
      }
      // Held until the job ends (on_job_end), at most the longest term.
      auto g = book_.renew(lease_id, peer, mesh::kMaxLeaseTermMs, now);
      if (!g) return reply(std::move(g).error());
      bound_[lease_id] = job_id;
      lease_of_job_[job_id] = lease_id;
      spdlog::info("mesh: lease {} bound to job {}", lease_id, job_id);
      reply(nlohmann::json{{"bound", true}});
    });
  });
}

void MeshProvider::on_job_end(const nlohmann::json& view) {
  std::string job_id = view.value("job_id", "");
  if (job_id.empty()) return;
  changed();  // its devices are free again, its lease or not
  asio::post(io_, [this, alive = alive_, job_id] {
    if (!*alive) return;
    if (ended_.insert(job_id).second) {
      ended_order_.push_back(job_id);
      if (ended_order_.size() > kEndedKept) {
        ended_.erase(ended_order_.front());
        ended_order_.pop_front();
      }
    }
    auto it = lease_of_job_.find(job_id);
    if (it == lease_of_job_.end()) return;
    uint64_t lease_id = it->second;
    auto g = book_.leases().find(lease_id);
    if (g != book_.leases().end()) (void)book_.release(lease_id, g->second.consumer);
    bound_.erase(lease_id);
    lease_of_job_.erase(it);
    spdlog::info("mesh: job {} ended; lease {} released", job_id, lease_id);
  });
}

void MeshProvider::raise_horizon(mesh::UnixMs expires_at_ms, std::function<void()> then) {
  if (expires_at_ms <= horizon_ms_) return then();
  horizon_ms_ = expires_at_ms;
  asio::post(pool_, [this, alive = alive_, value = expires_at_ms, then = std::move(then)]() mutable {
    std::string tmp = horizon_file_ + ".tmp";
    bool ok = false;
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << value << "\n";
      out.flush();
      ok = static_cast<bool>(out);
    }
    if (ok) ok = std::rename(tmp.c_str(), horizon_file_.c_str()) == 0;
    if (!ok) spdlog::warn("mesh: cannot write {}; a restart within a lease term could grant a device twice", horizon_file_);
    asio::post(io_, [alive, then = std::move(then)] {
      if (*alive) then();
    });
  });
}

}  // namespace yonder::mesh
