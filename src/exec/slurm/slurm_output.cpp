#include "exec/slurm/slurm_output.h"

#include <charconv>

namespace yonder::exec::slurm {
namespace {

constexpr size_t kMaxLines = 100'000;

Status check_size(std::string_view output, const char* what) {
  if (output.size() > kMaxSlurmOutputBytes) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string(what) + " printed more than " + std::to_string(kMaxSlurmOutputBytes) +
                          " bytes; this is not what Slurm prints for one job: check slurm.bin_dir");
  }
  return ok_status();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

std::vector<std::string_view> lines(std::string_view s) {
  std::vector<std::string_view> out;
  for (auto line : split(s, '\n')) {
    line = trim(line);
    if (!line.empty()) out.push_back(line);
    if (out.size() >= kMaxLines) break;
  }
  return out;
}

std::string field(std::string_view v) { return std::string(v.substr(0, kMaxSlurmFieldBytes)); }

bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "CANCELLED by 0", "CANCELLED+", "cancelled" -> "CANCELLED".
std::string base_state(std::string_view s) {
  s = trim(s);
  size_t end = s.find_first_of(" +");
  if (end != std::string_view::npos) s = s.substr(0, end);
  std::string out = field(s.substr(0, 64));
  for (auto& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// "3:0" -> exit 3, signal 0.
bool parse_exit(std::string_view s, SlurmJob& job) {
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  int code = 0, sig = 0;
  if (!parse_int(s.substr(0, colon), code) || !parse_int(s.substr(colon + 1), sig)) return false;
  if (code < 0 || code > 255 || sig < 0 || sig > 255) return false;
  job.has_exit = true;
  job.exit_code = code;
  job.exit_signal = sig;
  return true;
}

bool is_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '/' || c == '_';
}

// "gpu:2", "gpu:a100:4(S:0-1)", "gpu:(null):1(IDX:0)", "gpu:0(IDX:N/A)":
// the GPU entry of a GRES list; false when there is none.
bool gpu_count(std::string_view gres, std::string& type, int& count) {
  for (auto entry : split(gres, ',')) {
    entry = trim(entry);
    if (entry.substr(0, 4) != "gpu:" && entry != "gpu") continue;
    size_t paren = entry.find('(');
    if (paren != std::string_view::npos) entry = entry.substr(0, paren);
    auto parts = split(entry, ':');
    if (parts.size() == 1) {
      count = 1;
      return true;
    }
    if (!parse_int(parts.back(), count) || count < 0) return false;
    if (parts.size() >= 3 && parts[1] != "(null)") type = field(parts[1].substr(0, 64));
    return true;
  }
  return false;
}

}  // namespace

bool is_slurm_job_id(std::string_view text) {
  return !text.empty() && text.size() <= 20 && text.find_first_not_of("0123456789") == std::string_view::npos;
}

Result<std::string> parse_sbatch_reply(std::string_view output) {
  YONDER_TRY(check_size(output, "sbatch"));
  auto all = lines(output);
  // The id is the last line; "sbatch: warning: ..." lines may precede it.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    std::string_view id = it->substr(0, it->find(';'));
    if (is_slurm_job_id(id)) return std::string(id);
  }
  return make_error(ErrorCode::kInternal, "sbatch did not print a job id (it printed '" +
                                              std::string(trim(output).substr(0, 200)) + "')");
}

std::string sbatch_error_text(std::string_view output) {
  if (output.size() > kMaxSlurmOutputBytes) output = output.substr(0, kMaxSlurmOutputBytes);
  std::string out;
  constexpr std::string_view kPrefix = "sbatch: error: ";
  for (auto line : lines(output)) {
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    if (!out.empty()) out += "; ";
    out += line.substr(kPrefix.size(), 512);
    if (out.size() > 2048) break;
  }
  if (out.empty()) out = std::string(trim(output).substr(0, 512));
  return out;
}

Result<SlurmJob> parse_scontrol_job(std::string_view output) {
  YONDER_TRY(check_size(output, "scontrol show job"));
  std::string_view text = trim(output);
  if (text.find("Invalid job id") != std::string_view::npos) {
    return make_error(ErrorCode::kNotFound, "Slurm no longer knows the job");
  }
  // The first line only: -o prints one line per job and we ask for one.
  text = text.substr(0, text.find('\n'));
  if (text.substr(0, 6) != "JobId=") {
    return make_error(ErrorCode::kInternal, "scontrol show job printed '" + std::string(text.substr(0, 200)) +
                                                "', not a job description");
  }
  SlurmJob job;
  // Split at every " Key=": a value runs to the next one, spaces included.
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eq = text.find('=', pos);
    if (eq == std::string_view::npos) break;
    std::string_view key = text.substr(pos, eq - pos);
    size_t value_start = eq + 1;
    size_t next = std::string_view::npos;
    for (size_t sp = text.find(' ', value_start); sp != std::string_view::npos; sp = text.find(' ', sp + 1)) {
      size_t k = sp + 1;
      while (k < text.size() && text[k] == ' ') ++k;
      size_t e = k;
      while (e < text.size() && is_key_char(text[e])) ++e;
      if (e > k && e < text.size() && text[e] == '=') {
        next = k;
        break;
      }
    }
    std::string_view value = next == std::string_view::npos ? text.substr(value_start) : text.substr(value_start, next - value_start);
    pairs.emplace_back(key, trim(value));
    if (pairs.size() > 1000) break;
    pos = next == std::string_view::npos ? text.size() : next;
  }
  for (auto [key, value] : pairs) {
    if (key == "JobId") {
      job.job_id = field(value);
    } else if (key == "JobName") {
      job.name = field(value);
    } else if (key == "JobState") {
      job.state = base_state(value);
    } else if (key == "Reason") {
      job.reason = field(value);
    } else if (key == "Comment") {
      job.comment = field(value);
    } else if (key == "StdOut") {
      job.std_out = field(value);
    } else if (key == "ExitCode") {
      if (!parse_exit(value, job)) {
        return make_error(ErrorCode::kInternal, "scontrol printed an exit code Yonder cannot read: '" +
                                                    std::string(value.substr(0, 64)) + "'");
      }
    }
  }
  if (!is_slurm_job_id(job.job_id) || job.state.empty()) {
    return make_error(ErrorCode::kInternal, "scontrol show job printed no job id or state");
  }
  return job;
}

Result<std::vector<SlurmJob>> parse_squeue(std::string_view output) {
  YONDER_TRY(check_size(output, "squeue"));
  std::vector<SlurmJob> jobs;
  for (auto line : lines(output)) {
    auto cols = split(line, '|');
    if (cols.size() != 5 || !is_slurm_job_id(trim(cols[0]))) {
      return make_error(ErrorCode::kInternal, "squeue printed a line Yonder cannot read: '" +
                                                  std::string(line.substr(0, 200)) + "'");
    }
    SlurmJob job;
    job.job_id = std::string(trim(cols[0]));
    job.state = base_state(cols[1]);
    job.name = field(trim(cols[2]));
    job.comment = field(trim(cols[3]));
    if (job.comment == "(null)") job.comment.clear();
    job.reason = field(trim(cols[4]));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<std::optional<SlurmJob>> parse_sacct(std::string_view output, std::string_view job_id) {
  YONDER_TRY(check_size(output, "sacct"));
  for (auto line : lines(output)) {
    auto cols = split(line, '|');
    if (cols.size() < 3) {
      return make_error(ErrorCode::kInternal, "sacct printed a line Yonder cannot read: '" +
                                                  std::string(line.substr(0, 200)) + "'");
    }
    if (trim(cols[0]) != job_id) continue;  // "ID.batch", "ID.0": steps, and other jobs
    SlurmJob job;
    job.job_id = std::string(job_id.substr(0, 20));
    job.state = base_state(cols[1]);
    if (!parse_exit(trim(cols[2]), job)) {
      return make_error(ErrorCode::kInternal, "sacct printed an exit code Yonder cannot read: '" +
                                                  std::string(cols[2].substr(0, 64)) + "'");
    }
    if (job.state.empty()) return make_error(ErrorCode::kInternal, "sacct printed no state for job " + job.job_id);
    return std::optional<SlurmJob>(std::move(job));
  }
  return std::optional<SlurmJob>();
}

bool SlurmNodeGpus::available() const {
  // A trailing '*' means not responding; '~' powered off, '#' powering up,
  // '%' powering down, '!' pending power down, '$' maintenance reservation.
  if (state.empty() || state.find_first_of("*~#%!") != std::string::npos) return false;
  for (const char* bad : {"down", "drain", "fail", "inval", "unknown", "future", "maint", "reboot", "power"}) {
    if (state.find(bad) != std::string::npos) return false;
  }
  return true;
}

Result<std::vector<SlurmNodeGpus>> parse_sinfo_gpus(std::string_view output) {
  YONDER_TRY(check_size(output, "sinfo"));
  std::vector<SlurmNodeGpus> nodes;
  for (auto line : lines(output)) {
    auto cols = split(line, '|');
    if (cols.size() < 4 || trim(cols[0]).empty()) {
      return make_error(ErrorCode::kInternal, "sinfo printed a line Yonder cannot read: '" +
                                                  std::string(line.substr(0, 200)) + "'");
    }
    SlurmNodeGpus n;
    n.node = field(trim(cols[0]).substr(0, 256));
    n.state = field(trim(cols[1]).substr(0, 64));
    std::string used_type;
    if (!gpu_count(trim(cols[2]), n.type, n.total)) continue;  // a node without GPUs
    if (!gpu_count(trim(cols[3]), used_type, n.used)) n.used = 0;
    if (n.total > 4096 || n.used > n.total) {
      return make_error(ErrorCode::kInternal, "sinfo reports " + std::to_string(n.used) + " of " +
                                                  std::to_string(n.total) + " GPUs used on " + n.node);
    }
    // sinfo -N lists a node once per partition it is in.
    bool seen = false;
    for (const auto& m : nodes) seen = seen || m.node == n.node;
    if (!seen) nodes.push_back(std::move(n));
    if (nodes.size() > 100'000) break;
  }
  return nodes;
}

bool is_terminal_state(std::string_view state) {
  for (std::string_view s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "DEADLINE", "NODE_FAIL", "BOOT_FAIL",
                             "OUT_OF_MEMORY", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}) {
    if (state == s) return true;
  }
  return false;
}

TaskStatus task_status(const SlurmJob& job) {
  TaskStatus st;
  if (!is_terminal_state(job.state)) {
    st.state = job.state == "PENDING" ? TaskState::kCreated : TaskState::kRunning;
    return st;
  }
  st.state = TaskState::kExited;
  ExitInfo& e = st.exit;
  e.exit_code = job.exit_signal != 0 ? 128 + job.exit_signal : job.exit_code;
  const std::string& s = job.state;
  if (s == "TIMEOUT" || s == "DEADLINE") {
    e.cause = "time_limit";
    e.error = "the cluster stopped the job at its time limit (Slurm state " + s + ")";
  } else if (s == "NODE_FAIL" || s == "BOOT_FAIL") {
    e.cause = "node_failure";
    e.error = "the cluster node running the job failed (Slurm state " + s + ")";
  } else if (s == "OUT_OF_MEMORY") {
    e.cause = "out_of_memory";
    e.oom_killed = true;
    e.error = "the job ran out of memory on the cluster (Slurm state OUT_OF_MEMORY)";
  } else if (s == "PREEMPTED") {
    e.cause = "preempted";
    e.error = "the cluster preempted the job for a higher-priority one";
  } else if (s == "CANCELLED" || s == "REVOKED") {
    e.cause = "cancelled_by_cluster";
    e.error = "the job was cancelled on the cluster (Slurm state " + s + ")";
  } else if (s == "FAILED" && job.reason != "NonZeroExitCode" && !job.reason.empty() && job.reason != "None" &&
             job.exit_code == 0 && job.exit_signal == 0) {
    e.cause = "refused";
    e.error = "Slurm could not run the job: " + job.reason;
  }
  if (e.exit_code == 0 && !e.cause.empty()) e.exit_code = -1;
  return st;
}

}  // namespace yonder::exec::slurm
