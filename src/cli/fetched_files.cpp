#include "cli/fetched_files.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/shown.h"
#include "crypto/scope.h"
#include "transfer/outputs_policy.h"

namespace yonder::cli {

namespace {

uint64_t reply_count(const nlohmann::json& reply, const char* key) {
  return reply.is_object() && reply.contains(key) && reply[key].is_number_unsigned() ? reply[key].get<uint64_t>()
                                                                                     : uint64_t{0};
}

}  // namespace

std::string skipped_line(const nlohmann::json& reply) {
  uint64_t links = reply_count(reply, "links"), special = reply_count(reply, "special");
  auto n = [](uint64_t k, const char* one, const char* many) { return std::to_string(k) + " " + (k == 1 ? one : many); };
  std::string out;
  if (links > 0) out = n(links, "symbolic link", "symbolic links");
  if (special > 0) {
    out += (out.empty() ? "" : " and ") + n(special, "special file", "special files") + " (sockets, FIFOs, devices)";
  }
  return out.empty() ? out : "skipped " + out;
}

void report_fetched(const nlohmann::json& got) {
  const auto& files = got.contains("files") && got["files"].is_array() ? got["files"] : nlohmann::json::array();
  if (!files.empty()) {
    std::fprintf(stderr, "yonder: brought home %zu file(s), %s\n", files.size(),
                 format_size(reply_count(got, "bytes")).c_str());
  }
  if (got.contains("replaced") && got["replaced"].is_array()) {
    for (const auto& p : got["replaced"]) {
      if (p.is_string()) std::fprintf(stderr, "yonder:   replaced %s\n", shown(p.get<std::string>()).c_str());
    }
  }
  if (got.contains("left_out_why") && got["left_out_why"].is_string()) {
    std::fprintf(stderr, "yonder: %s\n", got["left_out_why"].get<std::string>().c_str());  // ours, not the peer's
  }
  std::string skipped = skipped_line(got);
  if (!skipped.empty()) std::fprintf(stderr, "yonder: the job's workspace: %s\n", skipped.c_str());
}

bool ask_past_outputs_budget(const Error& refusal) {
  if (!transfer::is_over_outputs_budget(refusal) || isatty(STDIN_FILENO) == 0 || isatty(STDERR_FILENO) == 0) {
    return false;
  }
  std::fprintf(stderr, "yonder: %s\nyonder: bring them home anyway? [y/N] ", refusal.message().c_str());
  std::fflush(stderr);
  char line[16] = {};
  if (std::fgets(line, sizeof line, stdin) == nullptr) return false;
  std::string answer(line);
  return answer == "y\n" || answer == "Y\n" || answer == "yes\n" || answer == "y" || answer == "yes";
}

}  // namespace yonder::cli
