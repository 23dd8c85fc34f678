// GET /metrics: Prometheus text (api/prometheus.h) for this node, behind the
// same token as every route (scrape config: docs/metrics.md).
//
// Cheap by construction: it reads what the other routes already serve
// (GET /v1/peers, GET /v1/provider/jobs and GET /v1/gpus, dispatched
// in-process without any network call) plus the consumer's job table (one
// SQLite read on the pool), the relay registrations PeerLink reports, the
// bytes of its link sessions and its handshake counters, and the executor
// latency histograms (exec/executor_metrics.h).
#pragma once

#include <memory>

#include "api/server.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::reach {
class PeerLink;
}

namespace yonder::node {

// Handlers run on `io`; `link` and `pool` must outlive the router.
void add_metrics_routes(api::Router& router, boost::asio::io_context& io, boost::asio::thread_pool& pool,
                        reach::PeerLink& link, std::shared_ptr<jobs::consumer::ConsumerJobStore> consumer_jobs);

}  // namespace yonder::node
