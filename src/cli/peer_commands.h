// Commands for sharing, pairing and peers. Each returns an exit
// code from exit_codes.h.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"

namespace yonder::cli {

struct ShareArgs {
  std::string expires = "1h";
  int uses = 1;
  std::string scope = "run";
  std::optional<int> gpus;
  std::optional<std::string> vram, max_time, memory, disk, cpus;
  std::optional<int> max_jobs;
  bool egress = false;
  bool no_qr = false;
  bool replace_scope = false;
  std::string label;
  bool wait = false;  // --wait: until the link is used, then who paired and the pairing's check digits
};
int cmd_share(const Context& ctx, const ShareArgs& args);
int cmd_links(const Context& ctx);
int cmd_links_revoke(const Context& ctx, const std::string& id);
int cmd_pair(const Context& ctx, const std::string& link);
// Every paired peer as a table; with `which` (a name or a start of a node
// id), that one peer in full, its pairing's check digits among the rest.
int cmd_peers(const Context& ctx, const std::string& which = "");
// This node's reachability: listening address, relays and what they see, NAT.
int cmd_netcheck(const Context& ctx);
int cmd_deny(const Context& ctx, const std::string& peer, bool stop_jobs);
// `yonder allow PEER CAPS` adds capabilities; `yonder scope PEER ...` sets
// capabilities and limits. Both take effect on the peer's next request.
struct ScopeArgs {
  std::optional<std::string> capabilities, add, remove;
  std::optional<int> gpus, max_jobs;
  std::optional<std::string> vram, max_time, memory, disk, cpus;
  std::optional<bool> egress;
};
// Lifts a deny of `peer` (its old grant comes back; its old link stays
// revoked), then adds `capabilities` to its grant when given.
int cmd_allow(const Context& ctx, const std::string& peer, const std::string& capabilities, ScopeArgs args);
int cmd_scope(const Context& ctx, const std::string& peer, const ScopeArgs& args);
int cmd_ping(const Context& ctx, const std::string& peer, int count, double interval_s);
int cmd_speedtest(const Context& ctx, const std::string& peer, const std::string& bytes, int streams);
int cmd_call(const Context& ctx, const std::string& peer, const std::string& method, const std::string& params);

// The QR code of `text` as terminal half-block characters (libqrencode).
std::string render_qr(const std::string& text);

}  // namespace yonder::cli
