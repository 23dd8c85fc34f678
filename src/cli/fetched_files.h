// What the CLI says about files that crossed the link: the outputs a fetch
// brought home (each replaced path, what the outputs policy left out and
// why) and what an upload or fetch skipped (links, special files). Every
// path is the job's choice, so it is printed through shown().
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace yonder::cli {

// "skipped 3 symbolic links and 1 special file (sockets, FIFOs, devices)"
// from an upload's or a fetch's reply ("links", "special"), or empty when
// nothing was skipped.
std::string skipped_line(const nlohmann::json& reply);

// To stderr: "brought home N file(s), SIZE", "replaced PATH" for each local
// file replaced, the policy's "left out ..." line, the skipped line.
void report_fetched(const nlohmann::json& got);

}  // namespace yonder::cli
