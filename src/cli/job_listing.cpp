#include "cli/job_listing.h"

#include <algorithm>

namespace yonder::cli {
namespace {

using nlohmann::json;

const std::set<std::string> kListingStates = {"pending", "starting", "running", "exited", "stopped", "failed"};
const std::set<std::string> kListingEnded = {"exited", "stopped", "failed"};

std::string listing_text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

int64_t listing_int(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

std::string two_digits(int64_t v) {
  return (v < 10 ? "0" : "") + std::to_string(v);
}

}  // namespace

Result<PsFilter> parse_ps_filters(const std::vector<std::string>& given) {
  PsFilter f;
  for (const auto& g : given) {
    size_t eq = g.find('=');
    std::string key = g.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : g.substr(eq + 1);
    if (key == "status") key = "state";
    if (eq == std::string::npos || value.empty() ||
        (key != "state" && key != "provider" && key != "image" && key != "name")) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--filter takes KEY=VALUE with KEY state, provider, image or name "
                        "(e.g. --filter state=running), not \"" +
                            g + "\"");
    }
    if (key == "state" && value == "queued") value = "pending";  // its name before; Slurm's is PENDING
    if (key == "state" && !kListingStates.count(value)) {
      return make_error(ErrorCode::kInvalidArgument, "--filter state=" + value +
                                                         ": a state is one of pending, "
                                                         "starting, running, exited, stopped, failed");
    }
    f.values[key].insert(value);
  }
  return f;
}

bool PsFilter::wants_ended() const {
  if (since_s > 0) return true;
  auto it = values.find("state");
  if (it == values.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [](const std::string& s) { return kListingEnded.count(s) > 0; });
}

bool PsFilter::matches(const json& job) const {
  if (since_s > 0 && listing_int(job, "submitted_at") < since_s) return false;
  for (const auto& [key, alternatives] : values) {
    bool any = false;
    for (const auto& v : alternatives) {
      if (key == "state") {
        any = listing_text(job, "state") == v;
      } else if (key == "image") {
        any = listing_text(job, "image") == v;
      } else if (key == "name") {  // a part of it, as docker matches names
        any = listing_text(job, "name").find(v) != std::string::npos;
      } else {  // provider: by name, or by the start of its node id
        any = listing_text(job, "provider_name") == v || listing_text(job, "provider").rfind(v, 0) == 0;
      }
      if (any) break;
    }
    if (!any) return false;
  }
  return true;
}

Result<PsFormat> parse_ps_format(const std::string& text) {
  if (text.empty() || text == "table") return PsFormat::kTable;
  if (text == "json") return PsFormat::kJson;
  return make_error(ErrorCode::kInvalidArgument,
                    "--format takes table or json (one job a line), not \"" + text + "\"; templates are not supported");
}

std::vector<json> ps_rows(const json& listing, const PsFilter& filter) {
  std::vector<json> rows;
  if (!listing.is_object() || !listing.contains("jobs") || !listing["jobs"].is_array()) return rows;
  for (const auto& j : listing["jobs"]) {
    if (filter.matches(j)) rows.push_back(j);
  }
  // The daemon lists oldest first; a job submitted in the same second as
  // another keeps their order reversed too.
  std::reverse(rows.begin(), rows.end());
  std::stable_sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
    return listing_int(a, "submitted_at") > listing_int(b, "submitted_at");
  });
  return rows;
}

std::string ago_text(int64_t s) {
  if (s < 1) return "Less than a second ago";
  if (s < 60) return std::to_string(s) + (s == 1 ? " second ago" : " seconds ago");
  int64_t m = s / 60;
  if (m == 1) return "About a minute ago";
  if (m < 60) return std::to_string(m) + " minutes ago";
  int64_t h = m / 60;
  if (h == 1) return "About an hour ago";
  if (h < 48) return std::to_string(h) + " hours ago";
  int64_t d = h / 24;
  if (d < 14) return std::to_string(d) + " days ago";
  return std::to_string(d / 7) + " weeks ago";
}

int64_t run_seconds(const json& job, int64_t now_s) {
  int64_t started = listing_int(job, "started_at");
  if (started <= 0) return -1;
  int64_t finished = listing_int(job, "finished_at");
  if (finished <= 0 && kListingEnded.count(listing_text(job, "state"))) return -1;  // ended, but not when: do not guess
  int64_t end = finished >= started ? finished : now_s;
  return std::max<int64_t>(0, end - started);
}

int64_t gpu_seconds(const json& job, int64_t now_s) {
  int64_t gpus = 0;
  if (auto g = job.find("gpus"); g != job.end()) {  // the provider's view: the leased GPUs' ids
    gpus = g->is_array() ? static_cast<int64_t>(g->size()) : g->is_number_integer() ? g->get<int64_t>() : 0;
  }
  // A share of one GPU: its part of the device (the provider's "share" view), as its receipt meters it.
  int64_t permille = 1000;
  if (auto sh = job.find("share"); gpus <= 0 && sh != job.end() && sh->is_object() && sh->contains("gpu")) {
    gpus = 1;
    auto p = sh->find("permille");
    if (p != sh->end() && p->is_number_integer()) permille = std::clamp<int64_t>(p->get<int64_t>(), 1, 1000);
  }
  if (gpus <= 0) return 0;
  int64_t s = run_seconds(job, now_s);
  return s < 0 ? -1 : (gpus * s * permille + 999) / 1000;
}

std::string span_text(int64_t s) {
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + two_digits(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h" + two_digits(s / 60 % 60) + "m";
  return std::to_string(s / 86400) + "d" + two_digits(s / 3600 % 24) + "h";
}

std::string duration_text(const json& job, int64_t now_s) {
  int64_t s = run_seconds(job, now_s);
  return s < 0 ? "-" : span_text(s);
}

nlohmann::ordered_json inspect_view(const json& job) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!job.is_object()) return out;
  bool ended_badly = listing_text(job, "state") == "failed" || listing_text(job, "state") == "stopped" ||
                     (job.contains("exit_code") && job["exit_code"].is_number_integer() && job["exit_code"] != 0);
  std::vector<const char*> first = {"job_id", "name", "state", "exit_code"};
  if (ended_badly) {
    for (const char* k : {"reason", "message", "oom_killed", "log_lost"}) first.push_back(k);
  }
  for (const char* k : {"image", "image_id", "command", "provider_name", "provider", "provider_reachable", "gpus", "share",
                        "gpu_model", "fake_gpus", "submitted_at", "created_at", "started_at", "finished_at",
                        "updated_at", "wall_time_s", "log_bytes", "log_truncated", "queue_position", "waiting_for"}) {
    first.push_back(k);
  }
  // Through text: nlohmann converts between its two kinds of object no other way.
  auto ordered = [](const json& v) { return nlohmann::ordered_json::parse(v.dump()); };
  for (const char* k : first) {
    if (job.contains(k)) out[k] = ordered(job[k]);
  }
  for (const auto& [k, v] : job.items()) {
    if (!out.contains(k)) out[k] = ordered(v);
  }
  return out;
}

}  // namespace yonder::cli
