#include "mesh/core/work_units.h"

#include <algorithm>
#include <cstdlib>

namespace yonder::mesh {

namespace {

Error bad_range(const std::string& text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument,
                    "--array " + text + ": " + why + " (write 0-N or 0-N%LIMIT, e.g. 0-4999%8)");
}

bool parse_u32(const std::string& s, uint32_t& out) {
  if (s.empty() || s.size() > 9) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  out = v;
  return true;
}

}  // namespace

Status parse_array_range(const std::string& text, ArraySpec& spec) {
  if (text.size() > 32) return bad_range(text.substr(0, 32) + "...", "too long");
  std::string range = text, limit;
  bool has_limit = false;
  if (size_t pct = text.find('%'); pct != std::string::npos) {
    range = text.substr(0, pct);
    limit = text.substr(pct + 1);
    has_limit = true;
  }
  size_t dash = range.find('-');
  if (dash == std::string::npos) return bad_range(text, "no range");
  uint32_t first = 0, last = 0;
  if (!parse_u32(range.substr(0, dash), first) || !parse_u32(range.substr(dash + 1), last)) {
    return bad_range(text, "the bounds must be whole numbers");
  }
  if (first != 0) return bad_range(text, "indices start at 0");
  if (last + 1 > kMaxArrayTasks) return bad_range(text, "at most " + std::to_string(kMaxArrayTasks) + " tasks");
  uint32_t lim = 0;
  if (has_limit && (!parse_u32(limit, lim) || lim == 0)) return bad_range(text, "the limit after % must be 1 or more");
  spec.tasks = last + 1;
  spec.limit = lim;
  return ok_status();
}

const char* task_state_name(TaskState s) {
  switch (s) {
    case TaskState::kPending:
      return "pending";
    case TaskState::kRunning:
      return "running";
    case TaskState::kDone:
      return "done";
    case TaskState::kFailed:
      return "failed";
  }
  return "?";
}

ArrayRun::ArrayRun(ArraySpec spec) : spec_(spec), tasks_(spec.tasks) {
  for (uint32_t i = 0; i < spec.tasks; ++i) pending_.insert(pending_.end(), i);
}

size_t ArrayRun::budget(size_t capacity) const {
  if (spec_.limit == 0) return capacity;
  size_t running = attempts_.size();
  return running >= spec_.limit ? 0 : std::min<size_t>(capacity, spec_.limit - running);
}

std::vector<ArrayLaunch> ArrayRun::next(UnixMs now, size_t capacity) {
  std::vector<ArrayLaunch> out;
  if (cancelled_) return out;
  size_t n = budget(capacity);
  while (out.size() < n && !pending_.empty()) {
    uint32_t t = *pending_.begin();
    pending_.erase(pending_.begin());
    Task& task = tasks_[t];
    task.state = TaskState::kRunning;
    uint64_t id = next_attempt_++;
    attempts_[id] = Attempt{t, std::nullopt, now, false};
    task.running.push_back(id);
    out.push_back({t, id, task.avoid, false});
  }
  // Near the end: nothing left to start, so spare slots copy stragglers.
  if (out.size() < n && pending_.empty() && speculative_running_ < spec_.max_speculative) {
    UnixMs median = median_task_ms();
    if (median > 0) {
      UnixMs slow = std::max<UnixMs>(spec_.min_straggler_ms, static_cast<UnixMs>(median * spec_.straggler_factor));
      // Oldest first: map order is attempt order, which is start order.
      std::vector<uint64_t> stragglers;
      for (const auto& [id, a] : attempts_) {
        const Task& task = tasks_[a.task];
        if (a.speculative || !a.provider || task.state != TaskState::kRunning || task.running.size() > 1) continue;
        if (now - a.started >= slow) stragglers.push_back(id);
      }
      for (uint64_t sid : stragglers) {
        if (out.size() >= n || speculative_running_ >= spec_.max_speculative) break;
        uint32_t t = attempts_[sid].task;
        Task& task = tasks_[t];
        std::set<PeerKey> avoid = task.avoid;
        avoid.insert(*attempts_[sid].provider);  // not where it is slow already
        uint64_t id = next_attempt_++;
        attempts_[id] = Attempt{t, std::nullopt, now, true};
        task.running.push_back(id);
        ++speculative_running_;
        out.push_back({t, id, std::move(avoid), true});
      }
    }
  }
  if (first_start_ == 0 && !out.empty()) first_start_ = now;
  return out;
}

void ArrayRun::unplaced(uint64_t attempt) {
  auto it = attempts_.find(attempt);
  // An attempt that had started counts too: its provider went and no other
  // would take the job. Keeping it (as this once did) left the array with an
  // attempt no one watched: "running" for ever, and the array never ended.
  if (it == attempts_.end()) return;
  Task& task = tasks_[it->second.task];
  if (it->second.speculative) --speculative_running_;
  task.running.erase(std::remove(task.running.begin(), task.running.end(), attempt), task.running.end());
  if (task.running.empty() && task.state == TaskState::kRunning) {
    task.state = TaskState::kPending;
    pending_.insert(it->second.task);
  }
  attempts_.erase(it);
}

Status ArrayRun::started(uint64_t attempt, const PeerKey& provider, UnixMs now) {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return make_error(ErrorCode::kNotFound, "no such attempt " + std::to_string(attempt));
  it->second.provider = provider;
  it->second.started = now;
  return ok_status();
}

ArrayRun::Verdict ArrayRun::finished(uint64_t attempt, AttemptOutcome outcome, UnixMs now, const std::string& result) {
  return end_attempt(attempt, outcome, now, result);
}

ArrayRun::Verdict ArrayRun::end_attempt(uint64_t attempt, AttemptOutcome outcome, UnixMs now, const std::string& result) {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return Verdict::kIgnored;
  Attempt a = it->second;
  attempts_.erase(it);
  if (a.speculative) --speculative_running_;
  Task& task = tasks_[a.task];
  task.running.erase(std::remove(task.running.begin(), task.running.end(), attempt), task.running.end());
  if (task.state == TaskState::kDone || task.state == TaskState::kFailed) {
    if (outcome == AttemptOutcome::kSucceeded) ++discarded_;
    return outcome == AttemptOutcome::kSucceeded ? Verdict::kDiscarded : Verdict::kIgnored;
  }
  if (outcome == AttemptOutcome::kSucceeded) {
    task.state = TaskState::kDone;
    task.result = result;
    task.result_by = a.provider;
    task.done_at = now;
    if (a.provider) durations_.push_back(std::max<UnixMs>(0, now - a.started));
    return Verdict::kResult;
  }
  if (a.provider) task.avoid.insert(*a.provider);
  if (outcome == AttemptOutcome::kLost) {
    ++task.losses;
    ++lost_;
  } else if (outcome == AttemptOutcome::kFailed) {
    ++task.failures;
  }
  if (!task.running.empty()) return Verdict::kIgnored;  // its other attempt goes on
  bool out_of_tries = task.failures > spec_.retries || task.losses > spec_.max_losses;
  if (out_of_tries || outcome == AttemptOutcome::kStopped || cancelled_) {
    task.state = TaskState::kFailed;
    return Verdict::kFailed;
  }
  task.state = TaskState::kPending;
  pending_.insert(a.task);
  ++retried_;
  return Verdict::kRetry;
}

std::vector<std::pair<uint64_t, ArrayRun::Verdict>> ArrayRun::provider_lost(const PeerKey& provider, UnixMs now) {
  std::vector<uint64_t> ids;
  for (const auto& [id, a] : attempts_) {
    if (a.provider && *a.provider == provider) ids.push_back(id);
  }
  std::vector<std::pair<uint64_t, Verdict>> out;
  for (uint64_t id : ids) out.emplace_back(id, end_attempt(id, AttemptOutcome::kLost, now, {}));
  return out;
}

std::vector<uint64_t> ArrayRun::redundant_attempts() const {
  std::vector<uint64_t> out;
  for (const auto& [id, a] : attempts_) {
    if (tasks_[a.task].state == TaskState::kDone) out.push_back(id);
  }
  return out;
}

Status ArrayRun::reopen(uint32_t task) {
  if (task >= tasks_.size() || tasks_[task].state != TaskState::kDone) {
    return make_error(ErrorCode::kFailedPrecondition, "task " + std::to_string(task) + " is not done");
  }
  Task& t = tasks_[task];
  t.state = TaskState::kPending;
  t.result.clear();
  if (t.result_by) t.avoid.insert(*t.result_by);
  t.result_by.reset();
  pending_.insert(task);
  ++retried_;
  return ok_status();
}

Result<uint64_t> ArrayRun::adopt(uint32_t task, UnixMs now) {
  if (task >= tasks_.size() || tasks_[task].state != TaskState::kPending) {
    return make_error(ErrorCode::kFailedPrecondition, "task " + std::to_string(task) + " is not waiting to run");
  }
  pending_.erase(task);
  tasks_[task].state = TaskState::kRunning;
  uint64_t id = next_attempt_++;
  attempts_[id] = Attempt{task, std::nullopt, now, false};
  tasks_[task].running.push_back(id);
  if (first_start_ == 0) first_start_ = now;
  return id;
}

uint32_t ArrayRun::retry_failed() {
  uint32_t n = 0;
  for (uint32_t i = 0; i < tasks_.size(); ++i) {
    Task& task = tasks_[i];
    if (task.state != TaskState::kFailed) continue;
    task.state = TaskState::kPending;
    task.failures = 0;
    task.losses = 0;
    task.avoid.clear();
    pending_.insert(i);
    ++n;
  }
  if (n > 0) cancelled_ = false;
  return n;
}

bool ArrayRun::complete() const {
  if (!attempts_.empty()) return false;
  if (cancelled_) return true;
  return pending_.empty();
}

ArrayCounts ArrayRun::counts() const {
  ArrayCounts c;
  for (const auto& t : tasks_) {
    switch (t.state) {
      case TaskState::kPending:
        ++c.pending;
        break;
      case TaskState::kRunning:
        ++c.running;
        break;
      case TaskState::kDone:
        ++c.done;
        break;
      case TaskState::kFailed:
        ++c.failed;
        break;
    }
  }
  c.attempts_running = static_cast<uint32_t>(attempts_.size());
  c.speculative_running = speculative_running_;
  c.retried = retried_;
  c.lost = lost_;
  c.discarded = discarded_;
  return c;
}

std::optional<uint32_t> ArrayRun::task_of(uint64_t attempt) const {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return std::nullopt;
  return it->second.task;
}

std::optional<PeerKey> ArrayRun::provider_of(uint64_t attempt) const {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return std::nullopt;
  return it->second.provider;
}

std::map<PeerKey, uint32_t> ArrayRun::results_by_provider() const {
  std::map<PeerKey, uint32_t> out;
  for (const auto& t : tasks_) {
    if (t.state == TaskState::kDone && t.result_by) ++out[*t.result_by];
  }
  return out;
}

UnixMs ArrayRun::median_task_ms() const {
  if (durations_.empty()) return 0;
  if (median_of_ == 0 || durations_.size() >= median_of_ + median_of_ / 8 + 1) {
    std::vector<UnixMs> d = durations_;
    auto mid = d.begin() + static_cast<long>(d.size() / 2);
    std::nth_element(d.begin(), mid, d.end());
    median_ms_ = *mid;
    median_of_ = durations_.size();
  }
  return median_ms_;
}

UnixMs ArrayRun::estimate_left_ms(UnixMs now) const {
  ArrayCounts c = counts();
  uint32_t left = c.pending + c.running;
  if (left == 0 || c.done == 0 || first_start_ == 0 || now <= first_start_) return 0;
  // Throughput so far: done tasks per ms since the first start.
  double rate = static_cast<double>(c.done) / static_cast<double>(now - first_start_);
  return static_cast<UnixMs>(static_cast<double>(left) / rate);
}

nlohmann::json ArrayRun::to_json() const {
  // Providers are named once; a task's "by" is an index into that list.
  std::map<PeerKey, size_t> index;
  nlohmann::json providers = nlohmann::json::array();
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : tasks_) {
    // Running tasks are kept as pending: their attempts are the driver's.
    TaskState s = t.state == TaskState::kRunning ? TaskState::kPending : t.state;
    nlohmann::json j = {{"s", task_state_name(s)}};
    if (t.failures) j["f"] = t.failures;
    if (t.losses) j["l"] = t.losses;
    if (!t.result.empty()) j["r"] = t.result;
    if (t.result_by) {
      auto [it, fresh] = index.emplace(*t.result_by, index.size());
      if (fresh) providers.push_back(NodeId(*t.result_by).to_string());
      j["by"] = it->second;
    }
    tasks.push_back(std::move(j));
  }
  return {{"v", 1},
          {"tasks", spec_.tasks},
          {"limit", spec_.limit},
          {"retries", spec_.retries},
          {"max_losses", spec_.max_losses},
          {"max_speculative", spec_.max_speculative},
          {"cancelled", cancelled_},
          {"retried", retried_},
          {"lost", lost_},
          {"discarded", discarded_},
          {"providers", std::move(providers)},
          {"state", std::move(tasks)}};
}

Result<ArrayRun> ArrayRun::from_json(const nlohmann::json& j) {
  try {
    return from_json_unchecked(j);
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kDataLoss,
                      std::string("the stored array state is damaged (") + e.what() + "); cancel it and run again");
  }
}

Result<ArrayRun> ArrayRun::from_json_unchecked(const nlohmann::json& j) {
  auto bad = [](const std::string& why) {
    return make_error(ErrorCode::kDataLoss, "the stored array state is damaged (" + why + "); cancel it and run again");
  };
  if (!j.is_object() || j.value("v", 0) != 1) return bad("unknown version");
  // const operator[] on a missing key is undefined behaviour: look first.
  if (!j.contains("state") || !j.contains("tasks")) return bad("no tasks");
  const auto& st = j["state"];
  if (!j["tasks"].is_number_unsigned() || !st.is_array()) return bad("no tasks");
  ArraySpec spec;
  spec.tasks = j["tasks"].get<uint32_t>();
  if (spec.tasks == 0 || spec.tasks > kMaxArrayTasks || st.size() != spec.tasks) return bad("task count");
  spec.limit = j.value("limit", 0u);
  spec.retries = j.value("retries", 0u);
  spec.max_losses = j.value("max_losses", 3u);
  spec.max_speculative = j.value("max_speculative", 2u);
  ArrayRun run(spec);
  run.cancelled_ = j.value("cancelled", false);
  std::vector<PeerKey> providers;
  if (j.contains("providers")) {
    if (!j["providers"].is_array()) return bad("providers");
    for (const auto& p : j["providers"]) {
      auto id = p.is_string() ? NodeId::parse(p.get<std::string>()) : Result<NodeId>(make_error(ErrorCode::kDataLoss, "x"));
      if (!id) return bad("provider id");
      providers.push_back(id->public_key());
    }
  }
  run.retried_ = j.value("retried", uint64_t{0});
  run.lost_ = j.value("lost", uint64_t{0});
  run.discarded_ = j.value("discarded", uint64_t{0});
  run.pending_.clear();
  for (uint32_t i = 0; i < spec.tasks; ++i) {
    const auto& t = st[i];
    if (!t.is_object() || !t.contains("s") || !t["s"].is_string()) return bad("task " + std::to_string(i));
    std::string s = t["s"];
    Task& task = run.tasks_[i];
    task.failures = t.value("f", 0u);
    task.losses = t.value("l", 0u);
    task.result = t.value("r", "");
    if (t.contains("by")) {
      if (!t["by"].is_number_unsigned() || t["by"].get<uint64_t>() >= providers.size()) {
        return bad("task " + std::to_string(i) + " provider");
      }
      task.result_by = providers[t["by"].get<size_t>()];
    }
    if (s == "done") {
      task.state = TaskState::kDone;
    } else if (s == "failed") {
      task.state = TaskState::kFailed;
    } else if (s == "pending") {
      task.state = TaskState::kPending;
      run.pending_.insert(i);
    } else {
      return bad("task " + std::to_string(i) + " state");
    }
  }
  return run;
}

}  // namespace yonder::mesh
