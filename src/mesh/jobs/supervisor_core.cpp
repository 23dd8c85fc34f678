#include "mesh/jobs/supervisor_core.h"

#include <algorithm>

namespace yonder::mesh::supervisor {

AttemptState parse_attempt_state(const std::string& s) {
  if (s == "placing") return AttemptState::kPlacing;
  if (s == "uploading") return AttemptState::kUploading;
  if (s == "running") return AttemptState::kRunning;
  if (s == "exited") return AttemptState::kExited;
  if (s == "failed") return AttemptState::kFailed;
  if (s == "stopped") return AttemptState::kStopped;
  if (s == "lost") return AttemptState::kLost;
  if (s == "not started") return AttemptState::kNotStarted;
  return AttemptState::kOther;
}

std::string attempt_state_name(AttemptState s) {
  switch (s) {
    case AttemptState::kPlacing: return "placing";
    case AttemptState::kUploading: return "uploading";
    case AttemptState::kRunning: return "running";
    case AttemptState::kExited: return "exited";
    case AttemptState::kFailed: return "failed";
    case AttemptState::kStopped: return "stopped";
    case AttemptState::kLost: return "lost";
    case AttemptState::kNotStarted: return "not started";
    case AttemptState::kOther: break;
  }
  return "other";
}

bool job_ended(AttemptState s) {
  return s == AttemptState::kExited || s == AttemptState::kFailed || s == AttemptState::kStopped;
}

namespace {

// One event's decisions, on a copy of the state.
class Decider {
 public:
  Decider(const JobState& s, MonoTime now, const Settings& settings) : now_(now), settings_(settings) {
    step_.state = s;
  }

  Step take() {
    step_.next_deadline = next_deadline(step_.state, settings_);
    return std::move(step_);
  }

  void operator()(const AttemptEnded& e) {
    if (st().finished || !valid(e.replica)) return;
    Slot& s = slot(e.replica);
    Attempt* a = running(s);
    if (a == nullptr) return;
    a->state = e.state;
    if (e.exit_code) a->exit_code = e.exit_code;
    a->why = e.why;
    if (a->why.empty() && a->exit_code) a->why = "exited with " + std::to_string(*a->exit_code);
    int index = s.current;
    if (st().stopping) return finish_with_attempt("stopped", index);
    bool answered = a->state == AttemptState::kExited && (st().replicas() > 1 || a->exit_code == 0);
    if (answered) {
      if (st().replicas() == 1) return finish_with_attempt("succeeded", index);
      s.settled = true;
      s.answer = index;
      s.current = kNoAttempt;
      return settled();
    }
    uint64_t retries = 0;
    for (const auto& x : st().attempts) {
      if (x.replica == e.replica && job_ended(x.state)) ++retries;
    }
    if (retries <= st().retries_allowed) {
      s.failed_on.insert(a->provider_id);
      s.current = kNoAttempt;
      return act(PlaceReplica{e.replica, true});
    }
    if (st().replicas() == 1) return finish_with_attempt("failed", index);
    give_up(e.replica, a->why);
  }

  void operator()(const ProviderAnswered& e) {
    if (st().finished || !valid(e.replica)) return;
    Slot& s = slot(e.replica);
    if (s.current >= 0) s.last_answer = now_;
  }

  void operator()(const Tick& e) {
    if (st().finished || !valid(e.replica)) return;
    Slot& s = slot(e.replica);
    if (s.place_again_at && now_ >= *s.place_again_at) {
      s.place_again_at.reset();
      return act(PlaceReplica{e.replica, false});
    }
    Attempt* a = running(s);
    if (a == nullptr || !s.last_answer || now_ - *s.last_answer <= settings_.provider_timeout) return;
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(settings_.provider_timeout).count();
    a->state = AttemptState::kLost;
    a->why = a->provider_name + " stopped answering for " + std::to_string(secs) + " s";
    s.failed_on.insert(a->provider_id);
    // Should it come back, the job there is stopped (best effort: it may never answer).
    act(StopAttempt{s.current});
    requeue(e.replica);
  }

  void operator()(const SubmitFailed& e) {
    if (!valid(e.replica)) return;
    Slot& s = slot(e.replica);
    if (s.current < 0) return;
    Attempt& a = st().attempts[static_cast<size_t>(s.current)];
    a.state = AttemptState::kNotStarted;
    a.why = e.why;
    s.failed_on.insert(a.provider_id);
    if (st().finished) {
      s.current = kNoAttempt;
      return act(SaveJob{});
    }
    requeue(e.replica);
  }

  void operator()(const PlacementStarted& e) {
    if (st().finished || !valid(e.replica)) return;
    Slot& s = slot(e.replica);
    s.current = kPlacing;
    s.place_again_at.reset();
  }

  void operator()(const PlacementFailed& e) {
    if (!valid(e.replica)) return;
    Slot& s = slot(e.replica);
    if (s.current == kPlacing) s.current = kNoAttempt;
    if (st().finished || s.settled) return;
    if (e.excluding_failed) {
      s.allow_failed = true;
      return act(PlaceReplica{e.replica, false});
    }
    s.allow_failed = false;
    bool never_ran = std::none_of(st().attempts.begin(), st().attempts.end(),
                                  [&](const Attempt& a) { return a.replica == e.replica; });
    if (never_ran && st().replicas() == 1) return finish_with_message("failed", e.message, true, e.code);
    if (++s.placement_failures > settings_.max_requeues) {
      // No provider would take it any more: not the job's fault, and the
      // result says so (an array puts the task back, mesh_arrays.h).
      if (st().replicas() == 1) return finish_with_message("failed", "could not place it: " + e.message, true, "");
      return give_up(e.replica, "could not place it: " + e.message);
    }
    s.place_again_at = now_ + settings_.provider_timeout;
    act(PlaceLater{e.replica, *s.place_again_at});
  }

  void operator()(const Placed& e) {
    if (!valid(e.replica)) return;
    Slot& s = slot(e.replica);
    if (s.current == kPlacing) s.current = kNoAttempt;
    if (st().finished || s.settled) return;
    s.allow_failed = false;
    s.placement_failures = 0;
    st().attempts.push_back(e.attempt);
    st().attempts.back().replica = e.replica;
    s.current = static_cast<int>(st().attempts.size()) - 1;
    s.last_answer.reset();
  }

  void operator()(const StopRequested&) {
    if (st().finished) return;
    st().stopping = true;
    bool any_running = false;
    for (auto& s : st().slots) {
      if (running(s) == nullptr) continue;
      any_running = true;
      act(StopAttempt{s.current});
    }
    // Not on a provider: nothing to stop there (a submit on its way is stopped when it lands).
    if (!any_running) finish_with_message("stopped", "stopped before it ran", false, "");
  }

 private:
  JobState& st() { return step_.state; }
  bool valid(int r) const { return r >= 0 && r < step_.state.replicas(); }
  Slot& slot(int r) { return st().slots[static_cast<size_t>(r)]; }
  Attempt* running(Slot& s) {
    if (s.current < 0 || static_cast<size_t>(s.current) >= st().attempts.size()) return nullptr;
    Attempt* a = &st().attempts[static_cast<size_t>(s.current)];
    return a->state == AttemptState::kRunning ? a : nullptr;
  }
  void act(Action a) { step_.actions.push_back(std::move(a)); }

  void requeue(int r) {
    Slot& s = slot(r);
    s.current = kNoAttempt;
    uint32_t requeues = 0;
    std::string last;
    for (const auto& a : st().attempts) {
      if (a.replica != r) continue;
      if (a.state == AttemptState::kLost || a.state == AttemptState::kNotStarted) ++requeues;
      last = a.why;
    }
    if (requeues > settings_.max_requeues) {
      return give_up(r, "gave up after " + std::to_string(requeues) + " providers lost or refused it (" + last +
                            "); mesh.max_requeues is " + std::to_string(settings_.max_requeues));
    }
    act(PlaceReplica{r, true});
  }

  void give_up(int r, const std::string& why) {
    if (st().replicas() == 1) return finish_with_message("failed", why, false, "");
    Slot& s = slot(r);
    s.settled = true;
    s.current = kNoAttempt;
    settled();
  }

  void settled() {
    bool all = std::all_of(st().slots.begin(), st().slots.end(), [](const Slot& s) { return s.settled; });
    if (all && !st().deciding) {
      st().deciding = true;
      return act(DecideQuorum{});
    }
    act(SaveJob{});
  }

  void finish_with_attempt(const std::string& state, int index) {
    if (st().finished) return;
    st().finished = true;
    act(FinishJob{state, index, "", false, ""});
  }

  void finish_with_message(const std::string& state, const std::string& message, bool unplaced,
                           const std::string& code) {
    if (st().finished) return;
    st().finished = true;
    act(FinishJob{state, std::nullopt, message, unplaced, code});
  }

  Step step_;
  MonoTime now_;
  const Settings& settings_;
};

}  // namespace

Step on_event(const JobState& state, const Event& event, MonoTime now, const Settings& settings) {
  Decider d(state, now, settings);
  std::visit(d, event);
  return d.take();
}

std::optional<MonoTime> next_deadline(const JobState& state, const Settings& settings) {
  if (state.finished) return std::nullopt;
  std::optional<MonoTime> best;
  auto consider = [&](MonoTime t) {
    if (!best || t < *best) best = t;
  };
  for (const auto& s : state.slots) {
    if (s.place_again_at) consider(*s.place_again_at);
    if (s.current < 0 || static_cast<size_t>(s.current) >= state.attempts.size()) continue;
    if (state.attempts[static_cast<size_t>(s.current)].state != AttemptState::kRunning || !s.last_answer) continue;
    consider(*s.last_answer + settings.provider_timeout);
  }
  return best;
}

Placement placement_for(const JobState& state, int replica) {
  Placement p;
  if (replica < 0 || replica >= state.replicas() || state.finished) return p;
  const Slot& s = state.slots[static_cast<size_t>(replica)];
  if (s.settled || s.current != kNoAttempt) return p;
  // One placement at a time per job, so that replicas land on distinct providers.
  for (const auto& other : state.slots) {
    if (other.current == kPlacing) {
      p.what = Placement::What::kWait;
      return p;
    }
  }
  p.what = Placement::What::kPlace;
  // Replicas run on distinct providers, always; the ones that failed this
  // replica are left out while anyone else can take it.
  for (size_t o = 0; o < state.slots.size(); ++o) {
    if (static_cast<int>(o) == replica) continue;
    const Slot& other = state.slots[o];
    int i = other.current >= 0 ? other.current : other.answer;
    if (i >= 0 && static_cast<size_t>(i) < state.attempts.size())
      p.exclude.insert(state.attempts[static_cast<size_t>(i)].provider_id);
  }
  p.excluding_failed = !s.allow_failed && !s.failed_on.empty();
  if (p.excluding_failed) p.exclude.insert(s.failed_on.begin(), s.failed_on.end());
  return p;
}

}  // namespace yonder::mesh::supervisor
