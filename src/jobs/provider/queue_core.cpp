#include "jobs/provider/queue_core.h"

#include <algorithm>
#include <map>
#include <set>

namespace yonder::jobs::provider {
namespace {

void earliest(std::optional<MonoTime>& next, MonoTime at) {
  if (!next || at < *next) next = at;
}

// The distinct models of the leased devices, as the receipt names them
// (mesh/core/metering.h). A model whose name is part of one already named is
// not named again.
std::string models_of(const GpuView& gpus, const std::vector<std::string>& uuids) {
  std::string models;
  for (const auto& dev : gpus.devices) {
    if (std::find(uuids.begin(), uuids.end(), dev.uuid) == uuids.end() || dev.name.empty()) continue;
    if (models.find(dev.name) == std::string::npos) models += (models.empty() ? "" : "+") + dev.name;
  }
  return models.substr(0, 64);
}

// Policy rule 5: stops for wall time into the plan, the timers' actions
// into `timers`, and what stays pending as the plan's next deadline.
void plan_deadlines(const QueueSnapshot& s, QueuePlan& plan, std::vector<QueueAction>& timers) {
  std::vector<const ActiveJob*> by_id;
  for (const auto& a : s.active) by_id.push_back(&a);
  std::sort(by_id.begin(), by_id.end(), [](const ActiveJob* a, const ActiveJob* b) { return a->job_id < b->job_id; });
  bool vram_watched = false;
  for (const ActiveJob* a : by_id) {
    if (!a->running || a->stopping) continue;
    if (a->deadline && s.now >= *a->deadline) {
      plan.actions.push_back(StopJob{a->job_id, "wall_time",
                                     "stopped: the job ran past its wall-time limit of " +
                                         std::to_string(a->wall_time_s) + " s"});
      continue;
    }
    if (a->deadline) earliest(plan.next_deadline, *a->deadline);
    if (a->vram_limited && !a->gpu_uuids.empty()) vram_watched = true;
  }
  if (s.sweep_requested || (s.sweep_at && s.now >= *s.sweep_at)) {
    timers.push_back(SweepDisk{});
  } else if (s.sweep_at) {
    earliest(plan.next_deadline, *s.sweep_at);
  }
  if (vram_watched && s.vram_sample_at) {
    if (s.now >= *s.vram_sample_at) {
      timers.push_back(SampleVram{});
    } else {
      earliest(plan.next_deadline, *s.vram_sample_at);
    }
  }
}

// Policy rule 2's first part: holds and dependencies, for every queued job.
// Adds a wait or a refusal for each job that may not start now and returns
// their ids; the others go on to the pass.
std::set<std::string> plan_blocked(const std::map<std::string, const WaitingJob*>& waiting, QueuePlan& plan) {
  std::set<std::string> blocked;
  for (const auto& id : plan.order) {
    const WaitingJob& job = *waiting.at(id);
    if (job.held) {
      plan.actions.push_back(WaitJob{id, "held: it starts once released (yonder release " + id + ")"});
      blocked.insert(id);
      continue;
    }
    for (const auto& dep : job.after) {
      using State = Dependency::State;
      bool dead = dep.ok_only && (dep.state == State::kFailed || dep.state == State::kGone);
      if (dead) {
        std::string how = dep.state == State::kGone ? "is no longer known here" : "did not succeed (" + dep.how + ")";
        plan.actions.push_back(RefuseJob{id,
                                         "job " + dep.job_id + " " + how +
                                             ", so this --after-ok job can never start; submit it again without it",
                                         "dependency_failed"});
        blocked.insert(id);
        break;
      }
      if (dep.state == State::kPending) {
        plan.actions.push_back(
            WaitJob{id, "waiting for job " + dep.job_id + (dep.ok_only ? " to succeed (--after-ok)" : " to end (--after)")});
        blocked.insert(id);
        break;
      }
    }
  }
  return blocked;
}

// Policy rules 2 to 4: one pass over the queue in `plan.order`.
void plan_starts(const QueueSnapshot& s, QueuePlan& plan) {
  std::map<std::string, const WaitingJob*> waiting;
  for (const auto& w : s.queue) waiting.emplace(w.job_id, &w);
  std::set<std::string> blocked = plan_blocked(waiting, plan);
  int total = 0;
  std::map<std::string, int> per_peer;
  LeaseMap whole;                    // devices leased whole
  std::vector<ShareHolding> shares;  // shares placed
  std::set<std::string> reserved;    // devices held back from new shares for whole-GPU jobs that wait
  for (const auto& a : s.active) {
    ++total;
    ++per_peer[a.peer_id];
    if (a.share_vram_bytes > 0 && a.gpu_uuids.size() == 1) {
      shares.push_back(ShareHolding{a.job_id, a.gpu_uuids.front(), a.share_vram_bytes});
      continue;
    }
    for (const auto& u : a.gpu_uuids) whole[u] = a.job_id;
  }
  std::optional<DiskSnapshot> disk = s.disk;  // kept current as the pass promises disk
  std::set<std::string> left;                 // started or refused
  for (const auto& action : plan.actions) {
    if (const auto* refused = std::get_if<RefuseJob>(&action)) left.insert(refused->job_id);
  }
  for (const auto& id : plan.order) {
    if (blocked.count(id)) continue;
    if (total >= s.max_concurrent) break;
    const WaitingJob& job = *waiting.at(id);
    bool scoped = job.peer_limit > 0 && job.peer_limit < s.max_per_peer;
    int cap = scoped ? job.peer_limit : s.max_per_peer;
    if (per_peer[job.peer_id] >= cap) {
      std::string n = std::to_string(per_peer[job.peer_id]), limit = std::to_string(cap);
      plan.actions.push_back(WaitJob{
          id, scoped ? n + " of your jobs are starting or running, the most your scope on this provider allows at once (" +
                           limit + "); it starts when one ends, or ask the provider to raise it (yonder scope PEER --max-jobs N)"
                     : "this peer already has " + limit + " job(s) running (jobs.max_per_peer)"});
      continue;
    }
    // A job that must wait keeps its place, saying for what; one this
    // provider can never run ends with the reason. True: it may start.
    auto may_start = [&](Fit fit, const std::string& reason) {
      if (fit == Fit::kLater) plan.actions.push_back(WaitJob{id, reason});
      if (fit == Fit::kNever) {
        plan.actions.push_back(RefuseJob{id, reason});
        left.insert(id);
      }
      return fit == Fit::kNow;
    };
    if (disk) {
      auto d = decide_disk(job.disk_bytes, *disk);
      if (!may_start(d.fit, d.reason)) continue;
    }
    StartJob start{id, {}, "", 0};
    if ((job.gpus > 0 || job.share) && !s.gpus) {
      // The caller's contract is to probe when the queue holds a GPU job;
      // without the devices, waiting is the answer that loses nothing.
      may_start(Fit::kLater, "waiting for the GPU inventory to be read");
      continue;
    }
    if (job.share) {
      auto d = pick_share(*s.gpus, s.gpu_shares, whole, shares, reserved, *job.share);
      if (!may_start(d.fit, d.reason)) continue;
      start.gpu_uuids = {d.uuid};
      start.gpu_model = models_of(*s.gpus, start.gpu_uuids);
      start.share_vram_bytes = d.vram_bytes;
      for (const auto& dev : s.gpus->devices) {
        if (dev.uuid == d.uuid) start.share_permille = share_permille_of(d.vram_bytes, dev);
      }
      shares.push_back(ShareHolding{id, d.uuid, d.vram_bytes});
    } else if (job.gpus > 0) {
      LeaseMap busy = whole;  // a device with shares on it is not free for a whole-GPU job
      for (const auto& sh : shares) busy.emplace(sh.uuid, sh.job_id);
      auto d = pick_gpus(*s.gpus, busy, job.gpus, job.vram_bytes);
      if (d.fit == Fit::kLater) {
        bool drains = false;
        auto shared = [&](const std::string& u) {
          return std::any_of(shares.begin(), shares.end(), [&](const ShareHolding& h) { return h.uuid == u; });
        };
        for (const auto& u : reserve_for_whole(*s.gpus, whole, shares, reserved, job.gpus, job.vram_bytes)) {
          reserved.insert(u);
          drains = drains || shared(u);
        }
        if (drains) d.reason += "; no new shares start on the GPU(s) it will get, so it starts as their shares end";
      }
      if (!may_start(d.fit, d.reason)) continue;
      start.gpu_uuids = d.uuids;
      start.gpu_model = models_of(*s.gpus, d.uuids);
      for (const auto& u : start.gpu_uuids) whole[u] = id;
    }
    if (disk) disk->promised_unallocated += job.disk_bytes;  // its image comes later
    ++total;
    ++per_peer[job.peer_id];
    left.insert(id);
    plan.actions.push_back(std::move(start));
  }
  for (const auto& id : plan.order) {
    if (!left.count(id)) plan.queue.push_back(id);
  }
}

}  // namespace

std::vector<std::string> merge_order(const std::vector<std::string>& queue, const std::vector<std::string>& preferred) {
  std::set<std::string> queued(queue.begin(), queue.end());
  std::set<std::string> placed;
  std::vector<std::string> out;
  for (const auto& id : preferred) {
    if (queued.count(id) && placed.insert(id).second) out.push_back(id);
  }
  for (const auto& id : queue) {
    if (!placed.count(id)) out.push_back(id);
  }
  return out;
}

QueuePlan plan_queue(const QueueSnapshot& s) {
  QueuePlan plan;
  for (const auto& w : s.queue) plan.order.push_back(w.job_id);
  if (s.preferred_order) plan.order = merge_order(plan.order, *s.preferred_order);
  std::vector<QueueAction> timers;
  plan_deadlines(s, plan, timers);  // stops first
  plan_starts(s, plan);
  for (auto& t : timers) plan.actions.push_back(std::move(t));
  return plan;
}

}  // namespace yonder::jobs::provider
