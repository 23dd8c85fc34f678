#include "cli/group_commands.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/shown.h"
#include "crypto/scope.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

void group_print_json(const json& j) {
  std::printf("%s\n", j.dump(2).c_str());
}

Result<json> labels_object(const std::vector<std::string>& labels) {
  json o = json::object();
  for (const auto& l : labels) {
    auto eq = l.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument, "--label \"" + l + "\" must be key=value");
    }
    o[l.substr(0, eq)] = l.substr(eq + 1);
  }
  return o;
}

std::string labels_text(const json& labels) {
  std::string out;
  if (!labels.is_object()) return out;
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    out += (out.empty() ? "" : ",") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : "");
  }
  return out;
}

}  // namespace

int cmd_group_create(const Context& ctx, const GroupArgs& a) {
  auto labels = labels_object(a.labels);
  if (!labels) return print_error(labels.error(), kExitUsage);
  auto r = api(ctx, "POST", "/v1/groups", json{{"name", a.group}, {"labels", *labels}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  std::printf("Created group %s (%s); this node owns it. Invite others with: yonder group invite %s\n",
              shown(*r, "name", "").c_str(), r->value("group_id", "").c_str(), a.group.c_str());
  return kExitOk;
}

int cmd_group_invite(const Context& ctx, const GroupArgs& a) {
  auto expires = parse_duration_s(a.expires);
  if (!expires) return print_error(Error(expires.error()).with_context("--expires"), kExitUsage);
  if (a.uses < 1) return print_error(make_error(ErrorCode::kInvalidArgument, "--uses must be 1 or more"), kExitUsage);
  json body = {{"group", a.group}, {"expires_s", *expires}, {"uses", a.uses}, {"capabilities", a.scope}};
  auto r = api(ctx, "POST", "/v1/groups/invite", body);
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  std::printf("%s\n\n", r->value("link", "").c_str());
  std::printf("Invite into group %s: pairs the holder with this node (%s) and adds it to the group.\n",
              r->value("group", "").c_str(), shown(*r, "summary", "").c_str());
  std::printf(
      "Valid for %s, %d use(s). Redeem with: yonder group join LINK (or yonder pair LINK). Revoke with: "
      "yonder links revoke %s\n",
      a.expires.c_str(), a.uses, r->value("id", "").c_str());
  return kExitOk;
}

int cmd_group_join(const Context& ctx, const GroupArgs& a) {
  auto r = api(ctx, "POST", "/v1/pair", json{{"link", a.link}});
  if (!r) return fail(ctx, r.error());
  const json& groups = (*r)["groups"];
  bool joined = groups.is_array() && !groups.empty();
  if (ctx.json) {
    group_print_json(*r);
  } else {
    for (const auto& g : groups) {
      std::printf("Joined group %s (%s), version %llu, %zu members; paired with %s (%s)\n", shown(g, "name", "").c_str(),
                  g.value("group_id", "").c_str(), static_cast<unsigned long long>(g.value("version", uint64_t{0})),
                  static_cast<size_t>(g.value("members", 0)), shown(*r, "name", "").c_str(),
                  shown(*r, "summary", "").c_str());
    }
  }
  if (!joined) {
    std::fprintf(stderr,
                 "yonder: paired with %s, but the link was not an invite into a group (or the group is gone); "
                 "ask for a link made with `yonder group invite`\n",
                 shown(*r, "name", "").c_str());
    return kExitError;
  }
  return kExitOk;
}

int cmd_group_members(const Context& ctx, const GroupArgs& a) {
  auto r = api(ctx, "GET", "/v1/groups/members?group=" + query_escape(a.group));
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  std::printf("Group %s (%s), version %llu, owner %s\n", shown(*r, "name", "").c_str(), r->value("group_id", "").c_str(),
              static_cast<unsigned long long>(r->value("version", uint64_t{0})),
              r->value("owner_id", "").substr(0, 7).c_str());
  if (const json& relays = (*r)["relays"]; relays.is_array() && !relays.empty()) {
    std::string text;
    for (const auto& x : relays) text += (text.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : "");
    std::printf("Relays: %s\n", text.c_str());
  }
  std::printf("%-24s  %-16s  %-7s  %-7s  %s\n", "MEMBER", "NAME", "ROLE", "ONLINE", "LABELS");
  for (const auto& m : (*r)["members"]) {
    std::string online = m.value("self", false) ? "(self)" : (m.value("online", false) ? "yes" : "no");
    std::printf("%-24s  %-16s  %-7s  %-7s  %s\n", m.value("id", "").substr(0, 24).c_str(),
                shown(m, "name", "").substr(0, 16).c_str(), m.value("role", "").c_str(), online.c_str(),
                labels_text(m["labels"]).c_str());
  }
  return kExitOk;
}

int cmd_group_leave(const Context& ctx, const GroupArgs& a) {
  auto r = api(ctx, "POST", "/v1/groups/leave", json{{"group", a.group}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json)
    group_print_json(*r);
  else
    std::printf("Left group %s. The pairing with its members stays; `yonder deny` ends it.\n", a.group.c_str());
  return kExitOk;
}

int cmd_group_remove(const Context& ctx, const GroupArgs& a) {
  auto r = api(ctx, "POST", "/v1/groups/remove", json{{"group", a.group}, {"member", a.member}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json)
    group_print_json(*r);
  else
    std::printf("Removed %s from group %s (version %llu). Its pairing stays; `yonder deny` ends that.\n",
                r->value("removed", "").substr(0, 7).c_str(), a.group.c_str(),
                static_cast<unsigned long long>(r->value("version", uint64_t{0})));
  return kExitOk;
}

int cmd_group_label(const Context& ctx, const GroupArgs& a) {
  if (a.labels.size() != 1) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "give one label as key=value (key= removes it)"),
                       kExitUsage);
  }
  const std::string& l = a.labels[0];
  auto eq = l.find('=');
  if (eq == std::string::npos || eq == 0) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "label \"" + l + "\" must be key=value"), kExitUsage);
  }
  auto r = api(ctx, "POST", "/v1/groups/label",
               json{{"group", a.group}, {"member", a.member}, {"key", l.substr(0, eq)}, {"value", l.substr(eq + 1)}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json)
    group_print_json(*r);
  else
    std::printf("Group %s is at version %llu.\n", a.group.c_str(),
                static_cast<unsigned long long>(r->value("version", uint64_t{0})));
  return kExitOk;
}

int cmd_group_admin(const Context& ctx, const GroupArgs& a) {
  auto r = api(ctx, "POST", "/v1/groups/admin", json{{"group", a.group}, {"member", a.member}, {"admin", !a.remove}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  std::string who = r->value("member", "").substr(0, 7);
  if (a.remove) {
    std::printf("%s is a plain member of group %s again (version %llu); lists it signs from now on are refused.\n",
                who.c_str(), a.group.c_str(), static_cast<unsigned long long>(r->value("version", uint64_t{0})));
  } else {
    std::printf("%s is an admin of group %s (version %llu): it may invite, remove and label members.\n", who.c_str(),
                a.group.c_str(), static_cast<unsigned long long>(r->value("version", uint64_t{0})));
  }
  return kExitOk;
}

int cmd_group_relay(const Context& ctx, const GroupArgs& a) {
  json body = {{"group", a.group}, {a.remove ? "remove" : "add", a.relay}};
  auto r = api(ctx, "POST", "/v1/groups/relay", body);
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  std::string relays;
  for (const auto& x : (*r)["relays"]) relays += (relays.empty() ? "" : ", ") + x.get<std::string>();
  std::printf("Group %s is at version %llu; its relays: %s.\n", a.group.c_str(),
              static_cast<unsigned long long>(r->value("version", uint64_t{0})),
              relays.empty() ? "none" : relays.c_str());
  if (!a.remove) {
    std::printf("Members register there as they get this version; `yonder netcheck` on a member shows it.\n");
  }
  return kExitOk;
}

int cmd_group_list(const Context& ctx) {
  auto r = api(ctx, "GET", "/v1/groups");
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    group_print_json(*r);
    return kExitOk;
  }
  const json& groups = (*r)["groups"];
  if (!groups.is_array() || groups.empty()) {
    std::printf("This node is in no group. Create one with `yonder group create NAME`, or join with an invite link.\n");
    return kExitOk;
  }
  std::printf("%-20s  %-32s  %-6s  %-8s  %7s  %s\n", "NAME", "ID", "ROLE", "VERSION", "MEMBERS", "OWNER");
  for (const auto& g : groups) {
    std::printf("%-20s  %-32s  %-6s  %8llu  %7zu  %s\n", shown(g, "name", "").substr(0, 20).c_str(),
                g.value("group_id", "").c_str(), g.value("role", "").c_str(),
                static_cast<unsigned long long>(g.value("version", uint64_t{0})),
                static_cast<size_t>(g.value("members", 0)), g.value("owner_id", "").substr(0, 7).c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
