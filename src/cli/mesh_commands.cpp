#include "cli/mesh_commands.h"

#include <charconv>
#include <chrono>
#include <map>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/shown.h"
#include "crypto/scope.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

// Offers, dialling and each provider's answer: generous, the daemon bounds each step.
constexpr std::chrono::minutes kLeaseTimeout{2};

std::string age_text(int64_t ms) {
  if (ms < 1000) return "now";
  if (ms < 120'000) return std::to_string(ms / 1000) + "s ago";
  return std::to_string(ms / 60'000) + "m ago";
}

// "reputation 0.82, benchmark passed 2m ago (64x64 in 0.21 s)" for one provider of GET /v1/mesh.
std::string standing_text(const json& p) {
  char rep[64];
  std::snprintf(rep, sizeof rep, "reputation %.2f", p.value("reputation", 0.0));
  std::string out = rep;
  const json& b = p.contains("benchmark") ? p["benchmark"] : json(nullptr);
  if (!b.is_object()) return out + ", not benchmarked (`yonder mesh verify " + shown(p, "name", "PEER") + "`)";
  const json& d = b.contains("details") && b["details"].is_object() ? b["details"] : json::object();
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  out += ", benchmark " + b.value("outcome", std::string("?")) + " " + age_text(now_ms - b.value("at_ms", now_ms));
  int n = d.value("n", 0);
  if (d.contains("seconds") && d["seconds"].is_number()) {
    char t[96];
    std::snprintf(t, sizeof t, " (%dx%d in %.2f s)", n, n, d["seconds"].get<double>());
    out += t;
  }
  if (d.contains("reason") && d["reason"].is_string()) out += ": " + d["reason"].get<std::string>();
  return out;
}

// "GPU claim unverified: NVIDIA H200 (`yonder mesh verify NAME --gpu`)" for one provider of GET /v1/mesh:
// its models by what this node's GPU checks said of them.
std::string claims_text(const json& p) {
  std::map<std::string, std::string> by_model;  // model -> claim
  for (const auto& g : p["gpus"]) by_model[shown(g, "model", "")] = g.value("claim", std::string("unverified"));
  std::map<std::string, std::string> by_claim;  // claim -> "model, model"
  for (const auto& [model, claim] : by_model) {
    by_claim[claim] += (by_claim[claim].empty() ? "" : ", ") + model;
  }
  std::string out;
  for (const char* claim : {"verified", "failed", "unverified"}) {
    auto it = by_claim.find(claim);
    if (it == by_claim.end()) continue;
    out += (out.empty() ? "GPU claim " : "; ") + std::string(claim) + ": " + it->second;
  }
  if (by_claim.count("verified") == 0 || by_claim.size() > 1) {
    out += " (`yonder mesh verify " + shown(p, "name", "PEER") + " --gpu` checks it on one of its GPUs)";
  }
  return out;
}

}  // namespace

Result<uint32_t> parse_cuda_capability(const std::string& text) {
  auto bad = [&] {
    return make_error(ErrorCode::kInvalidArgument,
                      "--cuda takes a compute capability like 8.0 or 8.6, not \"" + text + "\"");
  };
  size_t dot = text.find('.');
  std::string major = text.substr(0, dot), minor = dot == std::string::npos ? "0" : text.substr(dot + 1);
  uint32_t a = 0, b = 0;
  auto pa = std::from_chars(major.data(), major.data() + major.size(), a);
  auto pb = std::from_chars(minor.data(), minor.data() + minor.size(), b);
  if (major.empty() || minor.empty() || pa.ec != std::errc() || pa.ptr != major.data() + major.size() ||
      pb.ec != std::errc() || pb.ptr != minor.data() + minor.size() || a > 99 || b > 99) {
    return bad();
  }
  return a * 100 + b;
}

int cmd_mesh(const Context& ctx, const std::string& group, bool cached) {
  std::string query;
  if (!group.empty()) query += "group=" + query_escape(group);
  if (cached) query += std::string(query.empty() ? "" : "&") + "refresh=0";
  auto r = api(ctx, "GET", query.empty() ? "/v1/mesh" : "/v1/mesh?" + query);
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  const json& providers = (*r)["providers"];
  if (!group.empty() && (!providers.is_array() || providers.empty())) {
    std::printf("no paired provider is in group %s (`yonder group members %s` lists them)\n", group.c_str(),
                group.c_str());
    return kExitOk;
  }
  // A provider shows its capacity only to peers it granted `mesh`: with
  // none that did, there is no mesh to show, and saying so is a failure.
  const char* no_mesh = "a provider shows its GPUs here only to peers it granted `mesh` (a link shared with "
                        "`--scope run,mesh`, or `yonder scope PEER --add mesh` on the provider); `yonder peers` "
                        "shows what each lets this node do";
  if (!providers.is_array() || providers.empty()) {
    std::fprintf(stderr, "yonder: no paired provider; %s\n", no_mesh);
    return kExitError;
  }
  std::printf("%-20s  %-28s  %5s  %5s  %8s  %-10s  %-10s  %s\n", "PROVIDER", "GPUS", "FREE", "QUEUE", "RTT", "PATH",
              "FRESH", "LABELS");
  for (const auto& p : providers) {
    std::string name = shown(p, "name", "") + " (" + p.value("node_id", "").substr(0, 7) + ")";
    std::string path = p.value("path", "");
    path = path.substr(0, path.find(' '));
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.1fms", p.value("rtt_ms", 0.0));
    if (!p.contains("gpus")) {
      std::printf("%-20s  %s\n", name.substr(0, 20).c_str(),
                  ("no capacity: " + p.value("error", p.value("state", ""))).c_str());
      continue;
    }
    // "2x FAKE GPU 24G" per distinct model and memory.
    std::string gpus;
    std::map<std::string, int> kinds;
    for (const auto& g : p["gpus"]) {
      kinds[g.value("model", "") + " " + format_size(g.value("memory_bytes", uint64_t{0})) + " cc" + g.value("cuda", "")]++;
    }
    for (const auto& [k, n] : kinds) gpus += (gpus.empty() ? "" : ", ") + std::to_string(n) + "x " + k;
    if (gpus.empty()) gpus = "none";
    std::string labels;
    for (auto it = p["labels"].begin(); it != p["labels"].end(); ++it) {
      labels += (labels.empty() ? "" : ",") + it.key() + "=" + it->get<std::string>();
    }
    std::string fresh = p.value("fresh", false) ? age_text(p.value("age_ms", int64_t{0})) : "stale";
    std::printf("%-20s  %-28s  %5d  %5d  %8s  %-10s  %-10s  %s\n", name.substr(0, 20).c_str(), gpus.substr(0, 28).c_str(),
                p.value("free", 0), p.value("queue_depth", 0), rtt, path.c_str(), fresh.c_str(), labels.c_str());
    if (p.contains("error")) std::printf("  (last ask failed: %s)\n", p.value("error", "").c_str());
    if (p.contains("reputation")) std::printf("  %s\n", standing_text(p).c_str());
    if (!p["gpus"].empty()) std::printf("  %s\n", claims_text(p).c_str());
  }
  const json& t = (*r)["totals"];
  std::printf("total: %d provider(s), %d GPU(s), %d free, %d job(s) queued\n", t.value("providers", 0),
              t.value("gpus", 0), t.value("free", 0), t.value("queued", 0));
  bool any_capacity = false;
  for (const auto& p : providers) any_capacity = any_capacity || p.contains("gpus");
  if (!any_capacity) {
    std::fprintf(stderr, "yonder: no paired provider shared its capacity with this node; %s\n", no_mesh);
    return kExitError;
  }
  return kExitOk;
}

int cmd_mesh_verify(const Context& ctx, const std::string& peer, uint32_t size, const std::string& check) {
  json body = {{"peer", peer}};
  if (size > 0) body["size"] = size;
  if (check == "gpu" || check == "cpu") body["gpu"] = check == "gpu";
  if (!ctx.json) std::fprintf(stderr, "yonder: running the known-answer benchmark on %s...\n", peer.c_str());
  // The daemon answers when the job is over (mesh.benchmark_timeout_s bounds it).
  auto r = api(ctx, "POST", "/v1/mesh/verify", body, std::chrono::hours(25));
  if (!r) return fail(ctx, r.error());
  bool passed = r->value("outcome", "") == "passed";
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return passed ? kExitOk : kExitVerificationFailed;
  }
  const json& v = (*r)["verification"];
  const json& d = v.contains("details") && v["details"].is_object() ? v["details"] : json::object();
  std::printf("%s (%s): benchmark %s\n", shown((*r)["provider"], "name", "").c_str(),
              (*r)["provider"].value("node_id", "").substr(0, 7).c_str(), passed ? "passed" : "FAILED");
  int n = d.value("n", 0);
  std::printf("  job %s: %dx%d integer matrix product mod 65521, checksum %s (expected %s)\n",
              r->value("job_id", "").c_str(), n, n,
              d.contains("answer") ? d["answer"].dump().c_str() : "none", d.value("expected", json(nullptr)).dump().c_str());
  if (d.contains("seconds") && d["seconds"].is_number()) {
    std::printf("  %.2f s, %.3g multiply-adds/s (timed by the provider)\n", d["seconds"].get<double>(),
                d.value("rate_madds_per_s", 0.0));
  }
  std::string model = shown(d, "gpu_model", "");
  if (d.value("gpu", false)) {
    std::printf("  GPU model it advertises: %s; the job's GPU: %s\n", model.c_str(),
                d.contains("device") ? shown(d, "device", "").c_str() : "not named");
    std::printf("  %s\n", passed ? "its GPU claim is verified: placement no longer weighs it down"
                                  : "its GPU claim is not verified: placement weighs it down");
  } else {
    std::printf("  GPU model it advertises: %s (the CPU check confirms the answer, not the model; `--gpu` checks the "
                "GPU)\n",
                model.empty() ? "none" : model.c_str());
  }
  if (d.contains("reason")) std::printf("  why it failed: %s\n", shown(d, "reason", "").c_str());
  return passed ? kExitOk : kExitVerificationFailed;
}

Result<json> mesh_lease_body(const MeshNeeds& needs) {
  json body = {{"gpus", needs.gpus}, {"vram_bytes", needs.vram_bytes}};
  if (needs.cuda) {
    auto cap = parse_cuda_capability(*needs.cuda);
    if (!cap) return std::move(cap).error();
    body["min_capability"] = *cap;
  }
  json labels = json::object();
  for (const auto& kv : needs.labels) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument, "--label takes KEY=VALUE, not \"" + kv + "\"");
    }
    labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!labels.empty()) body["labels"] = labels;
  if (needs.group) body["group"] = *needs.group;
  return body;
}

Result<MeshLease> mesh_lease(const Context& ctx, const MeshNeeds& needs) {
  auto body = mesh_lease_body(needs);
  if (!body) return std::move(body).error();
  auto r = api(ctx, "POST", "/v1/mesh/lease", *body, kLeaseTimeout);
  if (!r) return std::move(r).error();
  for (const auto& f : (*r)["refusals"]) {
    std::fprintf(stderr, "yonder: mesh: %s refused: %s\n", shown(f, "name", "").c_str(), shown(f, "reason", "").c_str());
  }
  const json& chosen = (*r)["chosen"];
  MeshLease lease;
  lease.provider_id = (*r)["provider"].value("node_id", "");
  lease.provider_name = shown((*r)["provider"], "name", "");
  lease.lease_id = r->value("lease_id", uint64_t{0});
  std::fprintf(stderr, "yonder: mesh: chose %s (%s) out of %zu feasible: %s\n", lease.provider_name.c_str(),
               lease.provider_id.substr(0, 7).c_str(), (*r)["plan"].size(), chosen.value("why", "").c_str());
  return lease;
}

void mesh_bind(const Context& ctx, const MeshLease& lease, const std::string& job_id) {
  auto r = api(ctx, "POST", "/v1/mesh/bind",
               {{"provider", lease.provider_id}, {"lease_id", lease.lease_id}, {"job_id", job_id}});
  if (!r) {
    std::fprintf(stderr, "yonder: mesh: could not tie lease %llu to job %s (it runs out on its own): %s\n",
                 static_cast<unsigned long long>(lease.lease_id), job_id.c_str(), r.error().message().c_str());
  }
}

void mesh_release(const Context& ctx, const MeshLease& lease) {
  (void)api(ctx, "POST", "/v1/mesh/release", {{"provider", lease.provider_id}, {"lease_id", lease.lease_id}});
}

}  // namespace yonder::cli
