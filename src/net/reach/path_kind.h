// How a live link session to a peer runs, best first: the order of
// link::path_rank (net/link/link_service.h), which the pure cores here
// cannot include (it brings Boost.Asio). The services convert with
// path_kind_from_rank(link::path_rank(path)).
#pragma once

namespace yonder::reach {

enum class PathKind { kLan = 0, kDirect = 1, kMapped = 2, kPunched = 3, kRelay = 4 };

// link::path_rank's number as a PathKind; a rank past the known ones is the
// worst (a relay), so a new kind of path never looks better than it is.
constexpr PathKind path_kind_from_rank(int rank) {
  if (rank <= 0) return PathKind::kLan;
  if (rank >= 4) return PathKind::kRelay;
  return static_cast<PathKind>(rank);
}

// Worse than a port the router maps to us: the link runs through a relay or
// a punched path, so a mapped port is worth telling the peer about.
constexpr bool worse_than_mapped(PathKind k) { return static_cast<int>(k) > static_cast<int>(PathKind::kMapped); }

}  // namespace yonder::reach
