// Progress bars for transfers the daemon does on the CLI's behalf (the
// workspace upload of `yonder run`): while the blocking request runs, a
// second thread asks the daemon for the transfer's progress
// (GET /v1/transfers?id=) a few times a second and redraws one line on
// stderr. Only on a terminal; otherwise nothing is drawn.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/context.h"

namespace yonder::cli {

// A fresh id to name a transfer in the request that starts it.
std::string new_transfer_id();

// Runs `call` while drawing the progress of transfer `id`.
Result<nlohmann::json> with_transfer_progress(const Context& ctx, const std::string& id,
                                              const std::function<Result<nlohmann::json>()>& call);

// `yonder transfers [--json]`: the uploads in flight.
int cmd_transfers(const Context& ctx);

// One line describing a transfer's progress, as drawn (for tests and logs).
std::string describe_transfer(const nlohmann::json& t, double elapsed_s);

}  // namespace yonder::cli
