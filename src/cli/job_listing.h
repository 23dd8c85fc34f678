// What `ps` and `inspect` show of the jobs this node submitted, without
// I/O: the filters and formats of `ps` as docker users type them, its
// CREATED and DURATION columns, and the order of `inspect`'s fields. The
// jobs are the daemon's views (GET /v1/jobs, /v1/jobs/inspect): times in
// Unix seconds, `submitted_at` on this node's clock, the rest on the
// provider's.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace yonder::cli {

// `--filter KEY=VALUE`, repeatable: values of one key are alternatives,
// different keys must all match (docker's rule). Keys: `state` (`status`
// too, as docker names it): pending, starting, running, exited, stopped,
// failed; `provider`: its name or the start of its node id; `image`: the
// image as submitted; `name`: a part of the job's name (`run --name`).
struct PsFilter {
  std::map<std::string, std::set<std::string>> values;  // key -> alternatives
  int64_t since_s = 0;  // `--since`: only jobs submitted then or later (Unix s; 0: all)

  // Whether a job that ended could match: then `ps` lists ended jobs too,
  // as `docker ps --filter status=exited` does without -a (and as sacct
  // lists a period's jobs with --since).
  bool wants_ended() const;
  bool matches(const nlohmann::json& job) const;
};
Result<PsFilter> parse_ps_filters(const std::vector<std::string>& given);

enum class PsFormat { kTable, kJson };
// `--format`: "table" (the default) or "json" (one object a line, as docker does).
Result<PsFormat> parse_ps_format(const std::string& text);

// The jobs of a GET /v1/jobs answer that pass `filter`, newest first.
std::vector<nlohmann::json> ps_rows(const nlohmann::json& listing, const PsFilter& filter);

// "12 seconds ago", "About a minute ago", "3 hours ago", as docker's CREATED.
std::string ago_text(int64_t seconds);
// How long the job has run (until `now_s` while it runs): "45s", "3m05s",
// "2h07m", "1d03h"; "-" before it started.
std::string duration_text(const nlohmann::json& job, int64_t now_s);
// Seconds the job has run (until `now_s` while it runs); -1 before it
// started or when it ended without a known end.
int64_t run_seconds(const nlohmann::json& job, int64_t now_s);
// GPU-seconds: its GPUs times run_seconds (0 without a GPU; -1 unknown).
int64_t gpu_seconds(const nlohmann::json& job, int64_t now_s);
// A span of seconds as duration_text writes it: "45s", "3m05s", "2h07m", "1d03h".
std::string span_text(int64_t seconds);

// The job as `inspect` prints it: what a person looks for first (id, state,
// exit code, and the reason and message when it did not end well), then
// what ran where, its times, its log and queue place, then the rest.
nlohmann::ordered_json inspect_view(const nlohmann::json& job);

}  // namespace yonder::cli
