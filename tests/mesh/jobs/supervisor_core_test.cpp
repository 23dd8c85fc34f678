// The mesh job supervisor's pure core (mesh/jobs/supervisor_core.h):
// examples of each rule of its policy, then properties over seeded random
// event sequences driven the way MeshJobs drives it, and a check that the
// core stays pure.
#include "mesh/jobs/supervisor_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "support/core_purity.h"

namespace yonder::mesh::supervisor {
namespace {

using namespace std::chrono_literals;
const MonoTime kT0 = MonoTime{} + 1000h;

Settings settings(uint32_t max_requeues = 3, std::chrono::milliseconds timeout = 60s) {
  Settings s;
  s.provider_timeout = timeout;
  s.max_requeues = max_requeues;
  return s;
}

JobState job(int replicas, uint64_t retries = 0) {
  JobState st;
  st.retries_allowed = retries;
  st.slots.resize(static_cast<size_t>(replicas));
  return st;
}

// Puts a running attempt on `provider` into slot r, its provider last heard at `heard`.
void run_on(JobState& st, int r, const std::string& provider, MonoTime heard = kT0) {
  Attempt a;
  a.replica = r;
  a.provider_id = provider;
  a.provider_name = provider + "-name";
  a.state = AttemptState::kRunning;
  st.attempts.push_back(a);
  st.slots[static_cast<size_t>(r)].current = static_cast<int>(st.attempts.size()) - 1;
  st.slots[static_cast<size_t>(r)].last_answer = heard;
}

template <typename T>
std::vector<T> all_of_kind(const Step& step) {
  std::vector<T> out;
  for (const auto& a : step.actions) {
    if (const auto* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

// ---- Examples, one per rule ----

TEST(SupervisorCore, ASilentProviderIsLostOnlyOnceNowPassesItsLastAnswerPlusTheTimeout) {
  JobState st = job(1);
  run_on(st, 0, "p1");
  Settings set = settings();
  Step at = on_event(st, Tick{0}, kT0 + 60s, set);
  EXPECT_TRUE(at.actions.empty()) << "at the deadline it is not lost yet";
  EXPECT_EQ(at.state, st);
  EXPECT_EQ(at.next_deadline, kT0 + 60s);
  Step past = on_event(st, Tick{0}, kT0 + 60s + 1ms, set);
  EXPECT_EQ(past.state.attempts[0].state, AttemptState::kLost);
  EXPECT_EQ(past.state.attempts[0].why, "p1-name stopped answering for 60 s");
  EXPECT_EQ(past.state.slots[0].failed_on, (std::set<std::string>{"p1"}));
  EXPECT_EQ(past.state.slots[0].current, kNoAttempt);
  EXPECT_EQ(past.actions, (std::vector<Action>{StopAttempt{0}, PlaceReplica{0, true}}));
  EXPECT_FALSE(past.next_deadline);
}

TEST(SupervisorCore, AnAnswerMovesTheDeadline) {
  JobState st = job(1);
  run_on(st, 0, "p1");
  Step s = on_event(st, ProviderAnswered{0}, kT0 + 50s, settings());
  EXPECT_EQ(s.next_deadline, kT0 + 110s);
  EXPECT_TRUE(on_event(s.state, Tick{0}, kT0 + 100s, settings()).actions.empty());
}

TEST(SupervisorCore, RequeuesUpToMaxRequeuesThenGivesUp) {
  Settings set = settings(1);
  JobState st = job(1);
  run_on(st, 0, "p1");
  Step first = on_event(st, Tick{0}, kT0 + 61s, set);
  EXPECT_EQ(all_of_kind<PlaceReplica>(first).size(), 1u) << "one requeue is allowed";
  JobState again = first.state;
  run_on(again, 0, "p2", kT0 + 61s);
  Step second = on_event(again, Tick{0}, kT0 + 122s, set);
  auto fin = all_of_kind<FinishJob>(second);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].state, "failed");
  EXPECT_EQ(
      fin[0].message,
      "gave up after 2 providers lost or refused it (p2-name stopped answering for 60 s); mesh.max_requeues is 1");
  EXPECT_FALSE(fin[0].unplaced);
  EXPECT_TRUE(all_of_kind<PlaceReplica>(second).empty());
  EXPECT_TRUE(second.state.finished);
}

TEST(SupervisorCore, ASubmitThatFailsIsNotStartedAndRequeued) {
  JobState st = job(1);
  run_on(st, 0, "p1");
  st.attempts[0].state = AttemptState::kUploading;
  Step s = on_event(st, SubmitFailed{0, "upload refused"}, kT0, settings());
  EXPECT_EQ(s.state.attempts[0].state, AttemptState::kNotStarted);
  EXPECT_EQ(s.state.attempts[0].why, "upload refused");
  EXPECT_EQ(s.state.slots[0].failed_on, (std::set<std::string>{"p1"}));
  EXPECT_EQ(s.actions, (std::vector<Action>{PlaceReplica{0, true}}));
}

TEST(SupervisorCore, ExitZeroSucceedsALoneReplica) {
  JobState st = job(1);
  run_on(st, 0, "p1");
  Step s = on_event(st, AttemptEnded{0, AttemptState::kExited, 0, ""}, kT0, settings());
  EXPECT_EQ(s.actions, (std::vector<Action>{FinishJob{"succeeded", 0, "", false, ""}}));
  EXPECT_EQ(s.state.attempts[0].exit_code, 0);
}

TEST(SupervisorCore, AFailedAttemptIsRetriedElsewhereWhileRetriesLastThenFails) {
  JobState st = job(1, 1);
  run_on(st, 0, "p1");
  Step s = on_event(st, AttemptEnded{0, AttemptState::kExited, 3, ""}, kT0, settings());
  EXPECT_EQ(s.state.attempts[0].why, "exited with 3");
  EXPECT_EQ(s.state.slots[0].failed_on, (std::set<std::string>{"p1"}));
  EXPECT_EQ(s.actions, (std::vector<Action>{PlaceReplica{0, true}}));
  JobState again = s.state;
  run_on(again, 0, "p2");
  Step last = on_event(again, AttemptEnded{0, AttemptState::kFailed, std::nullopt, "oom"}, kT0, settings());
  EXPECT_EQ(last.actions, (std::vector<Action>{FinishJob{"failed", 1, "", false, ""}}));
}

TEST(SupervisorCore, ReplicasSettleOnAnyExitAndTheQuorumIsDecidedOnceAllHave) {
  JobState st = job(3);
  run_on(st, 0, "p1");
  run_on(st, 1, "p2");
  run_on(st, 2, "p3");
  Step a = on_event(st, AttemptEnded{0, AttemptState::kExited, 7, ""}, kT0, settings());
  EXPECT_TRUE(a.state.slots[0].settled);
  EXPECT_EQ(a.state.slots[0].answer, 0);
  EXPECT_EQ(a.actions, (std::vector<Action>{SaveJob{}}));
  Step b = on_event(a.state, AttemptEnded{1, AttemptState::kExited, 0, ""}, kT0, settings());
  EXPECT_EQ(b.actions, (std::vector<Action>{SaveJob{}}));
  // The third fails with no retries: it gives up, and all have settled.
  Step c = on_event(b.state, AttemptEnded{2, AttemptState::kFailed, std::nullopt, "crashed"}, kT0, settings());
  EXPECT_TRUE(c.state.slots[2].settled);
  EXPECT_EQ(c.state.slots[2].answer, -1);
  EXPECT_EQ(c.actions, (std::vector<Action>{DecideQuorum{}}));
  EXPECT_TRUE(c.state.deciding);
  EXPECT_FALSE(c.state.finished) << "the quorum finishes it";
}

TEST(SupervisorCore, AStopStopsWhatRunsAndItsEndFinishesTheJobStopped) {
  JobState st = job(2);
  run_on(st, 0, "p1");
  Step s = on_event(st, StopRequested{}, kT0, settings());
  EXPECT_TRUE(s.state.stopping);
  EXPECT_EQ(s.actions, (std::vector<Action>{StopAttempt{0}}));
  Step e = on_event(s.state, AttemptEnded{0, AttemptState::kStopped, 137, ""}, kT0, settings());
  EXPECT_EQ(e.actions, (std::vector<Action>{FinishJob{"stopped", 0, "", false, ""}}));
  Step idle = on_event(job(1), StopRequested{}, kT0, settings());
  EXPECT_EQ(idle.actions,
            (std::vector<Action>{FinishJob{"stopped", std::nullopt, "stopped before it ran", false, ""}}));
}

TEST(SupervisorCore, PlacementExcludesSiblingsAndFailedProvidersAndWaitsForASiblingsLease) {
  JobState st = job(3);
  run_on(st, 0, "p1");
  st.slots[2].failed_on = {"p9"};
  Placement p = placement_for(st, 2);
  EXPECT_EQ(p.what, Placement::What::kPlace);
  EXPECT_EQ(p.exclude, (std::set<std::string>{"p1", "p9"}));
  EXPECT_TRUE(p.excluding_failed);
  st.slots[2].allow_failed = true;
  EXPECT_EQ(placement_for(st, 2).exclude, (std::set<std::string>{"p1"}));
  Step started = on_event(st, PlacementStarted{1}, kT0, settings());
  EXPECT_EQ(started.state.slots[1].current, kPlacing);
  EXPECT_EQ(placement_for(started.state, 2).what, Placement::What::kWait);
  EXPECT_EQ(placement_for(started.state, 0).what, Placement::What::kNothing) << "it has an attempt";
}

TEST(SupervisorCore, ALeaseThatFailsWhileExcludingFailedProvidersIsTriedAgainWithThem) {
  JobState st = job(1);
  st.slots[0].failed_on = {"p1"};
  st.slots[0].current = kPlacing;
  Step s = on_event(st, PlacementFailed{0, true, "no provider", "unavailable"}, kT0, settings());
  EXPECT_TRUE(s.state.slots[0].allow_failed);
  EXPECT_EQ(s.state.slots[0].current, kNoAttempt);
  EXPECT_EQ(s.actions, (std::vector<Action>{PlaceReplica{0, false}}));
  EXPECT_FALSE(placement_for(s.state, 0).excluding_failed);
}

TEST(SupervisorCore, ALoneJobThatNeverRanFailsUnplacedAtOnce) {
  JobState st = job(1);
  st.slots[0].current = kPlacing;
  Step s = on_event(st, PlacementFailed{0, false, "no provider has 2 GPUs", "unavailable"}, kT0, settings());
  EXPECT_EQ(s.actions,
            (std::vector<Action>{FinishJob{"failed", std::nullopt, "no provider has 2 GPUs", true, "unavailable"}}));
}

TEST(SupervisorCore, PlacementFailuresRetryAfterTheTimeoutThenGiveUp) {
  Settings set = settings(1, 10s);
  JobState st = job(2);
  run_on(st, 0, "p1");
  st.attempts[0].state = AttemptState::kLost;
  st.slots[0].current = kPlacing;
  st.slots[0].last_answer.reset();
  Step s = on_event(st, PlacementFailed{0, false, "busy", "unavailable"}, kT0, set);
  EXPECT_EQ(s.actions, (std::vector<Action>{PlaceLater{0, kT0 + 10s}}));
  EXPECT_EQ(s.next_deadline, kT0 + 10s);
  EXPECT_TRUE(on_event(s.state, Tick{0}, kT0 + 9s, set).actions.empty());
  Step due = on_event(s.state, Tick{0}, kT0 + 10s, set);
  EXPECT_EQ(due.actions, (std::vector<Action>{PlaceReplica{0, false}}));
  Step again = on_event(on_event(due.state, PlacementStarted{0}, kT0 + 10s, set).state,
                        PlacementFailed{0, false, "busy", "unavailable"}, kT0 + 10s, set);
  EXPECT_TRUE(again.state.slots[0].settled) << "a replica gives up after max_requeues failed placements";
  EXPECT_EQ(again.actions, (std::vector<Action>{SaveJob{}}));
  // A lone job finishes unplaced instead.
  JobState lone = job(1);
  run_on(lone, 0, "p1");
  lone.attempts[0].state = AttemptState::kLost;
  lone.slots[0].current = kPlacing;
  lone.slots[0].placement_failures = 1;
  Step fin = on_event(lone, PlacementFailed{0, false, "busy", "unavailable"}, kT0, set);
  EXPECT_EQ(fin.actions,
            (std::vector<Action>{FinishJob{"failed", std::nullopt, "could not place it: busy", true, ""}}));
}

TEST(SupervisorCore, ALeaseThatLandsAppendsTheAttemptAndResetsTheCount) {
  JobState st = job(1);
  st.slots[0].current = kPlacing;
  st.slots[0].placement_failures = 2;
  st.slots[0].allow_failed = true;
  Attempt a;
  a.provider_id = "p4";
  Step s = on_event(st, Placed{0, a}, kT0, settings());
  ASSERT_EQ(s.state.attempts.size(), 1u);
  EXPECT_EQ(s.state.slots[0].current, 0);
  EXPECT_EQ(s.state.slots[0].placement_failures, 0u);
  EXPECT_FALSE(s.state.slots[0].allow_failed);
  EXPECT_TRUE(s.actions.empty());
}

TEST(SupervisorCore, AFinishedJobDecidesNothingMore) {
  JobState st = job(1);
  run_on(st, 0, "p1");
  st.finished = true;
  EXPECT_TRUE(on_event(st, Tick{0}, kT0 + 1h, settings()).actions.empty());
  EXPECT_TRUE(on_event(st, AttemptEnded{0, AttemptState::kExited, 0, ""}, kT0, settings()).actions.empty());
  EXPECT_TRUE(on_event(st, StopRequested{}, kT0, settings()).actions.empty());
  EXPECT_FALSE(on_event(st, Tick{0}, kT0, settings()).next_deadline);
  st.attempts[0].state = AttemptState::kUploading;
  Step late = on_event(st, SubmitFailed{0, "gone"}, kT0, settings());
  EXPECT_EQ(late.actions, (std::vector<Action>{SaveJob{}})) << "the attempt is still recorded";
  EXPECT_EQ(late.state.attempts[0].state, AttemptState::kNotStarted);
}

TEST(SupervisorCore, TheNextDeadlineIsTheEarliestPending) {
  JobState st = job(3);
  run_on(st, 0, "p1", kT0 + 5s);
  run_on(st, 1, "p2", kT0 + 2s);
  st.slots[2].place_again_at = kT0 + 30s;
  EXPECT_EQ(next_deadline(st, settings(3, 10s)), kT0 + 12s);
  st.slots[2].place_again_at = kT0 + 1s;
  EXPECT_EQ(next_deadline(st, settings(3, 10s)), kT0 + 1s);
}

TEST(SupervisorCore, StateNamesRoundTrip) {
  for (auto s : {AttemptState::kPlacing, AttemptState::kUploading, AttemptState::kRunning, AttemptState::kExited,
                 AttemptState::kFailed, AttemptState::kStopped, AttemptState::kLost, AttemptState::kNotStarted}) {
    EXPECT_EQ(parse_attempt_state(attempt_state_name(s)), s);
  }
  EXPECT_EQ(parse_attempt_state("weird"), AttemptState::kOther);
}

// ---- Properties over seeded random event sequences ----

// Drives the core the way MeshJobs does: placements asked for are leased
// from a pool of providers (never an excluded one), uploads land or fail,
// running attempts answer, end or fall silent, time passes, now and then a
// stop. Checks the invariants after every step and returns a trace.
struct Trace {
  std::string trace;
  int finishes = 0;
};

std::string describe(const Action& a) {
  std::ostringstream o;
  if (const auto* x = std::get_if<StopAttempt>(&a)) o << "stop " << x->attempt;
  if (const auto* x = std::get_if<PlaceReplica>(&a)) o << "place " << x->replica << (x->save_first ? " saved" : "");
  if (const auto* x = std::get_if<PlaceLater>(&a))
    o << "later " << x->replica << " " << x->at.time_since_epoch().count();
  if (std::holds_alternative<SaveJob>(a)) o << "save";
  if (std::holds_alternative<DecideQuorum>(a)) o << "quorum";
  if (const auto* x = std::get_if<FinishJob>(&a)) o << "finish " << x->state << " " << x->message;
  return o.str();
}

std::optional<MonoTime> brute_deadline(const JobState& st, const Settings& set) {
  std::optional<MonoTime> best;
  if (st.finished) return best;
  for (const auto& s : st.slots) {
    std::vector<MonoTime> ts;
    if (s.place_again_at) ts.push_back(*s.place_again_at);
    if (s.current >= 0 && st.attempts[static_cast<size_t>(s.current)].state == AttemptState::kRunning && s.last_answer)
      ts.push_back(*s.last_answer + set.provider_timeout);
    for (auto t : ts) best = best ? std::min(*best, t) : t;
  }
  return best;
}

Trace simulate(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  Settings set = settings(static_cast<uint32_t>(pick(4)), std::chrono::milliseconds(1000));
  JobState st = job(1 + pick(3), static_cast<uint64_t>(pick(3)));
  const int providers = 2 + pick(5);
  MonoTime now = kT0;
  std::set<int> to_place;
  std::map<int, Placement> leasing;  // slot -> what it was told when its lease began
  for (int r = 0; r < st.replicas(); ++r) to_place.insert(r);
  Trace out;
  int decides = 0;
  bool finished_before = false;

  int after = 0;  // events after the job finished: they decide nothing
  for (int i = 0; i < 400; ++i) {
    if (st.finished && ++after > 20) break;
    now += std::chrono::milliseconds(pick(400));
    Event ev = Tick{pick(st.replicas())};
    int r = pick(st.replicas());
    const Slot& s = st.slots[static_cast<size_t>(r)];
    const Attempt* cur = s.current >= 0 ? &st.attempts[static_cast<size_t>(s.current)] : nullptr;
    int roll = pick(100);
    if (roll < 2) {
      ev = StopRequested{};
    } else if (to_place.count(r) > 0 && s.current == kNoAttempt) {
      Placement p = placement_for(st, r);
      if (p.what == Placement::What::kNothing) {
        to_place.erase(r);
        continue;
      }
      if (p.what == Placement::What::kWait) continue;
      // Never places on an excluded provider: siblings' and (unless allowed) failed ones are excluded.
      for (size_t o = 0; o < st.slots.size(); ++o) {
        if (static_cast<int>(o) == r) continue;
        int idx = st.slots[o].current >= 0 ? st.slots[o].current : st.slots[o].answer;
        if (idx >= 0) {
          EXPECT_EQ(p.exclude.count(st.attempts[static_cast<size_t>(idx)].provider_id), 1u) << seed;
        }
      }
      if (!s.allow_failed) {
        for (const auto& f : s.failed_on) EXPECT_EQ(p.exclude.count(f), 1u) << "seed " << seed << " " << f;
      }
      EXPECT_EQ(p.excluding_failed, !s.allow_failed && !s.failed_on.empty());
      to_place.erase(r);
      leasing[r] = p;
      ev = PlacementStarted{r};
    } else if (s.current == kPlacing) {
      const Placement& p = leasing[r];
      std::vector<std::string> free;
      for (int k = 0; k < providers; ++k) {
        std::string id = "p" + std::to_string(k);
        if (p.exclude.count(id) == 0) free.push_back(id);
      }
      if (free.empty() || pick(4) == 0) {
        ev = PlacementFailed{r, p.excluding_failed, "no provider", "unavailable"};
      } else {
        Attempt a;
        a.provider_id = free[static_cast<size_t>(pick(static_cast<int>(free.size())))];
        a.provider_name = a.provider_id;
        a.state = AttemptState::kUploading;
        ev = Placed{r, a};
        // Never requeues or retries past what is allowed: a new attempt only within the limits.
        uint32_t requeues = 0;
        uint64_t retries = 0;
        for (const auto& x : st.attempts) {
          if (x.replica != r) continue;
          if (x.state == AttemptState::kLost || x.state == AttemptState::kNotStarted) ++requeues;
          if (job_ended(x.state)) ++retries;
        }
        EXPECT_LE(requeues, set.max_requeues) << "seed " << seed;
        EXPECT_LE(retries, st.retries_allowed) << "seed " << seed;
      }
    } else if (cur != nullptr && cur->state == AttemptState::kUploading) {
      if (pick(3) == 0) {
        ev = SubmitFailed{r, "refused"};
      } else {
        // The submit landed: MeshJobs marks it running and starts watching.
        st.attempts[static_cast<size_t>(s.current)].state = AttemptState::kRunning;
        ev = ProviderAnswered{r};
      }
    } else if (cur != nullptr && cur->state == AttemptState::kRunning) {
      int what = pick(10);
      if (what < 5) {
        ev = Tick{r};
      } else if (what < 8) {
        ev = ProviderAnswered{r};
      } else {
        static const AttemptState kEnds[] = {AttemptState::kExited, AttemptState::kFailed, AttemptState::kStopped};
        ev = AttemptEnded{r, kEnds[pick(3)], pick(2) == 0 ? std::optional<int>(0) : std::optional<int>(pick(3)), ""};
      }
    }

    // The silence rule, checked against a brute-force reading of the state.
    std::optional<bool> expect_lost;
    if (const auto* t = std::get_if<Tick>(&ev)) {
      const Slot& ts = st.slots[static_cast<size_t>(t->replica)];
      if (!st.finished && ts.current >= 0 &&
          st.attempts[static_cast<size_t>(ts.current)].state == AttemptState::kRunning && ts.last_answer &&
          !(ts.place_again_at && now >= *ts.place_again_at)) {
        expect_lost = now > *ts.last_answer + set.provider_timeout;
      }
    }
    int lost_index = -1;
    if (expect_lost) lost_index = st.slots[static_cast<size_t>(std::get<Tick>(ev).replica)].current;

    Step step = on_event(st, ev, now, set);
    if (expect_lost) {
      EXPECT_EQ(step.state.attempts[static_cast<size_t>(lost_index)].state == AttemptState::kLost, *expect_lost)
          << "seed " << seed << " step " << i;
    }
    EXPECT_EQ(step.next_deadline, brute_deadline(step.state, set)) << "seed " << seed << " step " << i;
    if (finished_before) {
      for (const auto& a : step.actions) EXPECT_TRUE(std::holds_alternative<SaveJob>(a)) << describe(a);
    }
    out.trace += std::to_string(ev.index()) + "@" + std::to_string(now.time_since_epoch().count()) + ":";
    if (expect_lost && *expect_lost) out.trace += "lost;";
    for (const auto& a : step.actions) {
      out.trace += describe(a) + ";";
      if (std::holds_alternative<FinishJob>(a)) ++out.finishes;
      if (std::holds_alternative<DecideQuorum>(a)) {
        ++decides;
        for (const auto& sl : step.state.slots) EXPECT_TRUE(sl.settled) << "seed " << seed;
      }
      if (const auto* p = std::get_if<PlaceReplica>(&a)) to_place.insert(p->replica);
      if (const auto* p = std::get_if<PlaceLater>(&a)) {
        EXPECT_EQ(p->at, now + set.provider_timeout);
      }
    }
    out.trace += "\n";
    st = step.state;
    finished_before = st.finished;
    // Slots that settle are never placed again.
    for (int k = 0; k < st.replicas(); ++k) {
      if (st.slots[static_cast<size_t>(k)].settled) {
        EXPECT_NE(st.slots[static_cast<size_t>(k)].current, kPlacing);
      }
    }
    if (decides > 0) break;  // the quorum takes it from here
  }
  EXPECT_LE(out.finishes, 1) << "seed " << seed;
  EXPECT_LE(decides, 1) << "seed " << seed;
  EXPECT_FALSE(out.finishes > 0 && decides > 0) << "seed " << seed;
  return out;
}

TEST(SupervisorCoreProperties, InvariantsHoldOverRandomEventSequences) {
  int finished = 0;
  std::map<std::string, int> coverage;  // how often the traces reach each rule
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    Trace r = simulate(seed);
    finished += r.finishes;
    for (const char* what : {"lost", "gave up", "quorum", "later", "succeeded", "stopped"}) {
      for (size_t at = r.trace.find(what); at != std::string::npos; at = r.trace.find(what, at + 1)) ++coverage[what];
    }
    if (::testing::Test::HasFailure()) FAIL() << "seed " << seed << "\n" << r.trace;
  }
  EXPECT_GT(finished, 100) << "the sequences reach the job's end often enough to mean something";
  EXPECT_GT(coverage["lost"], 100);
  EXPECT_GT(coverage["gave up"], 20);
  EXPECT_GT(coverage["quorum"], 20);
  EXPECT_GT(coverage["later"], 20);
  EXPECT_GT(coverage["succeeded"], 20);
  EXPECT_GT(coverage["stopped"], 20);
}

TEST(SupervisorCoreProperties, DeterministicForASeed) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    Trace a = simulate(seed);
    Trace b = simulate(seed);
    ASSERT_EQ(a.trace, b.trace) << "seed " << seed;
  }
}

// ---- Purity: the core and what it includes stay free of I/O ----

TEST(SupervisorCorePurity, NoThreadsClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>",     "<mutex>",      "<condition_variable>",
                                           "<future>",     "<atomic>",     "asio",
                                           "sqlite",       "base/clock.h", "<fstream>",
                                           "<filesystem>", "<sys/",        "<unistd.h>",
                                           "os/",          "store/",       "spdlog",
                                           "nlohmann",     "api/",         "net/"};
  std::set<std::string> files =
      testing::check_core_purity({"mesh/jobs/supervisor_core.h", "mesh/jobs/supervisor_core.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_EQ(files.size(), 2u) << "the core and its header, nothing else";
}

}  // namespace
}  // namespace yonder::mesh::supervisor
