// The mesh from the command line: `yonder mesh` (the capacity
// of the providers this node is paired with) and the placement step of
// `yonder run --mesh` (cli/job_commands.cpp calls mesh_lease, then submits
// to the chosen provider through the usual run path, then mesh_bind).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/context.h"

namespace yonder::cli {

// `group`: only the members of that group (name or id prefix). `cached`:
// what the daemon holds (pulled earlier or pushed by the providers), asking no one.
int cmd_mesh(const Context& ctx, const std::string& group = "", bool cached = false);
// `yonder mesh verify PEER [--size N]`: runs the known-answer benchmark on
// PEER (POST /v1/mesh/verify) and prints the outcome; exits
// kExitVerificationFailed when the provider failed it. size 0: the
// daemon's mesh.benchmark_size.
// check: "gpu", "cpu" or "auto" (the daemon picks: the GPU check when it has
// a GPU benchmark image and the provider advertises GPUs).
int cmd_mesh_verify(const Context& ctx, const std::string& peer, uint32_t size = 0, const std::string& check = "auto");

// What a job asks the mesh for.
struct MeshNeeds {
  int gpus = 1;
  uint64_t vram_bytes = 0;                // per GPU
  std::optional<std::string> cuda;        // "8.0": the least compute capability
  std::vector<std::string> labels;        // KEY=VALUE, all required
  std::optional<std::string> group;       // only members of this group (name or id prefix)
};
// The lease the daemon got for a job.
struct MeshLease {
  std::string provider_id;
  std::string provider_name;
  uint64_t lease_id = 0;
};

// "8.6" -> 806. kInvalidArgument for anything but MAJOR[.MINOR], each 0..99.
Result<uint32_t> parse_cuda_capability(const std::string& text);

// The body of POST /v1/mesh/lease for `needs` (also a mesh job's "needs").
Result<nlohmann::json> mesh_lease_body(const MeshNeeds& needs);
// Places the job and books the chosen provider's devices (POST
// /v1/mesh/lease); prints on stderr which provider was chosen and why (its
// score's parts) and who refused on the way.
Result<MeshLease> mesh_lease(const Context& ctx, const MeshNeeds& needs);
// The job was submitted: the lease lasts as long as it does. Problems are
// printed (the lease then runs out on its own), never fatal.
void mesh_bind(const Context& ctx, const MeshLease& lease, const std::string& job_id);
// The submit failed: give the devices back now.
void mesh_release(const Context& ctx, const MeshLease& lease);

}  // namespace yonder::cli
