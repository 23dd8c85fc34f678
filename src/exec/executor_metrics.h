// How long the executor backends take for the steps that decide how soon a
// job runs, for GET /metrics (node/metrics_routes.cpp, docs/metrics.md).
//
// Process-wide, like a Prometheus client's default registry: a daemon has
// one executor, and the numbers describe the host's Docker engine or Slurm
// controller rather than one executor object, so they are recorded where the
// calls are made (docker/, slurm/) without threading a sink through the
// provider's wiring. Recording is lock-free (base/latency_histogram.h), from
// the job runner threads; the metrics route reads snapshots on the io thread.
#pragma once

#include "base/latency_histogram.h"

namespace yonder::exec {

struct ExecutorLatencies {
  // Docker: POST /containers/create (image present; pulls are before it).
  LatencyHistogram container_create;
  // Docker: POST /containers/{id}/start, until the engine answered.
  LatencyHistogram container_start;
  // Slurm: sbatch, until it answered with the job id.
  LatencyHistogram slurm_submit;
  // Executor::start, successful ones, whole: check, image, workspace,
  // create and start (Docker) or script and sbatch (Slurm).
  LatencyHistogram docker_task_start;
  LatencyHistogram slurm_task_start;
};

inline ExecutorLatencies& executor_latencies() {
  static ExecutorLatencies latencies;
  return latencies;
}

}  // namespace yonder::exec
