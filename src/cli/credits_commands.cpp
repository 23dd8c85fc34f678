#include "cli/credits_commands.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/shown.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

std::string peer_label(const json& v, const char* name_key, const char* id_key) {
  std::string name = shown(v, name_key, "");
  std::string id = v.value(id_key, "");
  return name.empty() ? id.substr(0, 7) : name + " (" + id.substr(0, 7) + ")";
}

}  // namespace

int cmd_credits(const Context& ctx) {
  auto r = api(ctx, "GET", "/v1/credits");
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  const json& peers = (*r)["peers"];
  if (!peers.is_array() || peers.empty()) {
    std::printf(
        "no receipts yet: credits start when a job ends between this node and a peer (allowance %.0f GPU-s each)\n",
        (*r)["params"].value("starting_allowance", 0.0));
    return kExitOk;
  }
  std::printf("%-28s  %12s  %12s  %12s  %8s\n", "PEER", "GIVEN", "TAKEN", "BALANCE", "RECEIPTS");
  for (const auto& p : peers) {
    std::printf("%-28s  %12.1f  %12.1f  %12.1f  %8d\n", peer_label(p, "name", "peer_id").c_str(), p.value("given", 0.0),
                p.value("taken", 0.0), p.value("balance", 0.0), p.value("receipts", 0));
  }
  std::printf(
      "GIVEN: normalised GPU-seconds the peer provided to this node; TAKEN: what it used here; BALANCE: "
      "allowance + given - taken, decayed when idle\n");
  return kExitOk;
}

int cmd_receipts(const Context& ctx, bool verify) {
  auto r = api(ctx, "GET", std::string("/v1/receipts") + (verify ? "?verify=1" : ""));
  if (!r) return fail(ctx, r.error());
  bool bad = false;
  for (const auto& v : (*r)["receipts"]) {
    if (verify && !v.value("verified", false) && v.value("state", "") != "signed") bad = true;
  }
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("%-16s  %-8s  %-24s  %-14s  %-16s  %9s  %5s  %s\n", "JOB", "ROLE", "PEER", "STATE", "GPU", "GPU-S",
                "EXIT", verify ? "VERIFIED" : "");
    for (const auto& v : (*r)["receipts"]) {
      std::string check;
      if (verify)
        check = v.value("verified", false) ? "yes" : "NO: " + v.value("verify_problem", "");
      else if (v.contains("problem"))
        check = v.value("problem", "");
      std::printf("%-16s  %-8s  %-24s  %-14s  %-16s  %9llu  %5d  %s\n", v.value("job_id", "").substr(0, 16).c_str(),
                  v.value("role", "").c_str(), peer_label(v, "peer_name", "peer_id").substr(0, 24).c_str(),
                  v.value("state", "").c_str(), v.value("gpu_model", "").substr(0, 16).c_str(),
                  static_cast<unsigned long long>(v.value("gpu_seconds", uint64_t{0})), v.value("exit_status", 0),
                  check.c_str());
    }
  }
  if (bad) {
    std::fprintf(stderr, "yonder: some receipts do not verify and are not counted in the credits (see above)\n");
    return kExitReceiptUnverified;
  }
  return kExitOk;
}

}  // namespace yonder::cli
