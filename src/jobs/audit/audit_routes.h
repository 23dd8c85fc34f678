// The local API route of the provider's audit log (jobs/audit/audit_log.h):
//
//   GET /v1/audit[?limit=N][&verify=1]
//       {"entries": [oldest first, the newest N (default 100)]}
//       with verify=1 also {"verify": {"ok", "entries", "first_bad_seq"?, "problem"?, "head_hash"}}
//
// Runs the SQLite work on the pool and replies on the event loop.
#pragma once

#include "api/server.h"
#include "jobs/audit/audit_log.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::audit {

void add_audit_routes(api::Router& router, boost::asio::io_context& io, boost::asio::thread_pool& pool,
                      audit::AuditLog& audit);

}  // namespace yonder::audit
