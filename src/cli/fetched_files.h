// What the CLI says about files that crossed the link: the outputs a fetch
// brought home (each replaced path, what the outputs policy left out and
// why) and what an upload or fetch skipped (links, special files). Every
// path is the job's choice, so it is printed through shown().
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace yonder::cli {

// "skipped 3 symbolic links and 1 special file (sockets, FIFOs, devices)"
// from an upload's or a fetch's reply ("links", "special"), or empty when
// nothing was skipped.
std::string skipped_line(const nlohmann::json& reply);

// To stderr: "brought home N file(s), SIZE", "replaced PATH" for each local
// file replaced, the policy's "left out ..." line, the skipped line.
void report_fetched(const nlohmann::json& got);

// A fetch the daemon refused because the outputs are over the budget of
// outputs.max_files / outputs.max_mib (transfer::is_over_outputs_budget):
// on a terminal (stdin and stderr), prints the refusal and asks "[y/N]";
// true only for a yes. Anything else (not that refusal, not a terminal, no
// answer) is false: the caller reports the refusal, which names the flag.
bool ask_past_outputs_budget(const Error& refusal);

}  // namespace yonder::cli
