// The mapped path: the router forwards our link port while yonderd runs
// (portmap::PortMapper, UPnP-IGD or NAT-PMP, renewed and removed on its own
// thread); the mapped address goes into share links and, as a path hint
// through a relay, to peers whose link runs through a relay or a punched
// path, which then dial it (path "mapped"). Hints from peers come here too:
// a peer's mapped port, dialled when path_hint_core.h says so. Whether to
// send or dial is that core's decision; this unit owns the mapper, gathers
// the facts and sends or dials.
//
// Event loop only (the mapper's news is posted onto it).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "crypto/identity.h"
#include "net/link/link_service.h"
#include "net/reach/local_host.h"
#include "net/reach/path_hint_core.h"
#include "net/reach/relay_paths.h"
#include "peers/trust_store.h"

namespace boost::asio {
class io_context;
}

namespace yonder::portmap {
class PortMapper;
struct PortMapperStatus;
}

namespace yonder::reach {

class MappedPaths {
 public:
  // `wanted`: link.port_mapping. `link` and `relays` outlive this.
  MappedPaths(boost::asio::io_context& io, link::LinkService& link, RelayPaths& relays, bool wanted);
  ~MappedPaths();
  MappedPaths(const MappedPaths&) = delete;
  MappedPaths& operator=(const MappedPaths&) = delete;

  // After the link listens (the port to map); maps only when wanted and the
  // link listens beyond loopback.
  void start(Listening listening);
  // Removes the mapping from the router (blocks until the mapper's thread is done).
  void stop();
  // netcheck asks again: the router now, unless a mapping is held (it is
  // renewed on its own schedule).
  void recheck();

  // A session to `peer` is up on `path` (LinkService::on_established).
  void on_established(const PublicKeyBytes& peer, const std::string& path);
  // A relay signal from the pinned peer `from` that is not a punch signal:
  // a path hint. `from_host`: its IP as the relay saw it ("" when it did not say).
  void on_hint(const peers::PeerRecord& from, ByteView data, const std::string& from_host);

  // "ip:port" the router forwards to our link port; empty while unmapped.
  const std::string& mapped() const { return mapped_; }
  // For netcheck: the mapper's state, and the external address while mapped.
  const nlohmann::json& state() const { return state_; }

 private:
  void on_port_mapping(const portmap::PortMapperStatus& status);
  void send_hint(const PublicKeyBytes& peer, PathKind path);

  boost::asio::io_context& io_;
  link::LinkService& link_;
  RelayPaths& relays_;
  bool wanted_;
  std::unique_ptr<portmap::PortMapper> mapper_;
  nlohmann::json state_ = {{"state", "off (link.port_mapping = false)"}};
  std::string mapped_;
  PathHintCore hints_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::reach
