// The tables `yonder peers` and `yonder links` print, from the daemon's
// answers. Pure: tested without a daemon (tests/cli/peer_listing_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace yonder::cli {

// A Unix time as "2026-12-03 18:30" in local time.
std::string local_minute(int64_t unix_s);

// One line a peer: its name, id, state, when it was last seen ("now" while
// connected), what it may do here, the path; then, for a peer that granted
// us something (a provider we paired with), what it lets us do there, on a
// line of its own. `peers`: the GET /v1/peers answer's "peers".
std::string peers_table(const nlohmann::json& peers);

// `yonder peers PEER`: one peer in full, a field a line: its name and id,
// state, when it was paired and through which link, the check digits of
// that pairing (to compare aloud with the other side's), what it may do
// here and what it lets us do there, its addresses, the path and round
// trip now, when it was last seen, and what its provider said.
std::string peer_detail(const nlohmann::json& peer);

// What `yonder share` says when the link it prints cannot be reached from
// beyond this host or this network: its addresses are all loopback, or all
// private (RFC 1918, CGNAT 100.64/10, link-local, IPv6 ULA), and it names
// no relay. "" when a peer elsewhere can use it (a public address, a host
// name, a relay). The fix is named in the text.
std::string share_reach_warning(const std::vector<std::string>& addresses, const std::vector<std::string>& relays);

// One line a share link: id, state, how many of its uses are spent
// ("0 of 1"), when it expires, its scope.
std::string links_table(const nlohmann::json& links);

// `share --wait`: the peer of GET /v1/peers `after` that pairing made (new
// since `before`, or paired again: its pairing time or check digits
// changed); null when there is none. Pure.
nlohmann::json newly_paired(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace yonder::cli
