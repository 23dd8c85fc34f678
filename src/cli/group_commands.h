// `yonder group create|invite|join|members|leave|remove|label|admin|relay|list`: groups
// of nodes with a signed, gossiped membership list (docs/cli.md;
// the daemon's side is mesh/groups/groups.h).
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

struct GroupArgs {
  std::string group;                // NAME (or group id)
  std::string member;               // MEMBER: node id, peer name or id prefix
  std::string link;                 // yonder://...
  std::string relay;                // HOST:PORT@NODE_ID (`group relay`)
  std::vector<std::string> labels;  // k=v
  std::string expires = "1h";
  int uses = 1;
  std::string scope = "run";
  bool remove = false;  // `group admin --remove`: demote; `group relay --remove`
};

int cmd_group_create(const Context& ctx, const GroupArgs& a);
int cmd_group_invite(const Context& ctx, const GroupArgs& a);
int cmd_group_join(const Context& ctx, const GroupArgs& a);
int cmd_group_members(const Context& ctx, const GroupArgs& a);
int cmd_group_leave(const Context& ctx, const GroupArgs& a);
int cmd_group_remove(const Context& ctx, const GroupArgs& a);
int cmd_group_label(const Context& ctx, const GroupArgs& a);
// Owner only: makes MEMBER an admin (with --remove: a plain member again).
int cmd_group_admin(const Context& ctx, const GroupArgs& a);
// Owner or admin: adds a relay to the group's list (with --remove: takes it out).
int cmd_group_relay(const Context& ctx, const GroupArgs& a);
int cmd_group_list(const Context& ctx);

}  // namespace yonder::cli
