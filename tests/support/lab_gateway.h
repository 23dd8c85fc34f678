// A home router's port-mapping gateway in the NAT lab (support/nat_lab.h):
// Debian's miniupnpd (nftables flavour) runs in the home's router ("nat-a"
// or "nat-b"), with NAT-PMP and UPnP-IGD on its LAN side (br0) and wan0 as
// its public side, so hosts in that home can map ports (src/portmap).
//
//   NatLab lab;
//   LabGateway gateway(lab, "nat-a");  // after the lab: stopped before it goes
//   ... a1 maps a port; pub reaches a1 through lab.address("nat-a") ...
//
// Two things the lab needs for miniupnpd, as a real router would have them:
//  - nftables chains for miniupnpd to fill (table inet filter: forward ->
//    miniupnpd, nat prerouting -> prerouting_miniupnpd, ...), and a rule in
//    the router's own FORWARD chain letting in what was DNATed (OpenWrt does
//    the same with "ct status dnat accept"), since the lab's FORWARD policy
//    is DROP and miniupnpd only adds to its own chain.
//  - a public address: miniupnpd 2.3 refuses to forward ports when its WAN
//    address is in a reserved range, and all the lab's are (RFC 5737, 2544).
//    It accepts the address a STUN server reports, so a minimal STUN
//    responder (RFC 5389 Binding, XOR-MAPPED-ADDRESS) runs on pub, on a port
//    of its own (gateways in both homes of one lab do not meet).
//
// Not thread-safe; the test's thread uses it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "support/nat_lab.h"
#include "support/temp_dir.h"

namespace yonder::testing {

class PipedProcess;
class StunResponder;

class LabGateway {
 public:
  static constexpr const char* kMiniupnpd = "/usr/sbin/miniupnpd";

  // Why no gateway can run here (miniupnpd is not installed), or nothing.
  static std::optional<std::string> unavailable_reason();

  // Sets the router up and starts miniupnpd; returns once it listens for
  // NAT-PMP with its public address known (a usable gateway). Throws
  // std::runtime_error saying what went wrong (with miniupnpd's output).
  explicit LabGateway(const NatLab& lab, std::string home = "nat-a");
  // stop().
  ~LabGateway();
  LabGateway(const LabGateway&) = delete;
  LabGateway& operator=(const LabGateway&) = delete;

  // Stops miniupnpd (SIGTERM; SIGKILL if it has not exited within 10 s) and
  // the STUN responder, and removes the chains and the FORWARD rule: the
  // home is again a router without a gateway daemon. Idempotent.
  void stop();

  // miniupnpd's output so far (it logs every request with -d); once
  // stopped, all of it.
  std::string log() const;
  // The port forwards miniupnpd holds now: its DNAT chain as `nft list
  // chain inet filter prerouting_miniupnpd` prints it ("" once stopped).
  std::string forwards() const;
  const std::string& home() const { return home_; }

 private:
  void start();

  const NatLab& lab_;
  const std::string home_;
  TempDir dir_;
  bool configured_ = false;  // the chains and the FORWARD rule are in place
  std::unique_ptr<StunResponder> stun_;
  std::unique_ptr<PipedProcess> daemon_;
  std::string stopped_log_;
};

}  // namespace yonder::testing
