// A feature as the daemon composes it: the link methods it serves to
// peers, the local-API routes it adds, and its start and stop. The
// composition root (node/daemon.cpp) builds each feature's service with
// what it needs, lists them, and drives every one through these four steps
// in order, so no feature repeats the preamble and none is forgotten.
//
// Order: register_methods and add_routes for every module, then start for
// every module (a failure stops the daemon from starting, with the
// module's name), all before the event loop serves anything; stop in
// reverse order when the daemon shuts down, on the event loop.
#pragma once

#include <string_view>

#include "base/error.h"

namespace yonder::api {

class Router;

class Module {
 public:
  virtual ~Module() = default;
  // For errors and logs ("mesh jobs", "receipts (consumer)").
  virtual std::string_view module_name() const = 0;
  // The methods paired peers may call over the link (its own LinkService).
  virtual void register_methods() {}
  virtual void add_routes(Router&) {}
  // Loads state, arms timers, picks up work a previous run left.
  virtual Status start() { return ok_status(); }
  // Cancels timers and work in flight that would outlive the loop.
  virtual void stop() {}
};

}  // namespace yonder::api
