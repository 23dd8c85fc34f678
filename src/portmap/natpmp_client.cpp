// NAT-PMP (RFC 6886) through libnatpmp. The exchange: a 2- or 12-byte UDP
// request to the gateway's port 5351, answered by one datagram; the client
// retransmits after 250 ms, doubling. libnatpmp would keep trying for about
// two minutes; we stop at our own deadline so that "no NAT-PMP here" is known
// in about a second. A gateway without NAT-PMP usually answers with ICMP port
// unreachable, which ends the wait at once.
//
// libnatpmp parses the replies (fixed-size, checked against the pending
// request); we only read the fields it filled in.
#include <arpa/inet.h>
// libnatpmp exports strnatpmperr but declares it only on request.
#define ENABLE_STRNATPMPERR 1
#include <natpmp.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <string>

#include "portmap/gateway_clients.h"

namespace yonder::portmap::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string dotted(in_addr_t a) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr in{};
  in.s_addr = a;
  ::inet_ntop(AF_INET, &in, buf, sizeof buf);
  return buf;
}

// Whether a libnatpmp error means "nobody answered" rather than a refusal.
bool is_silence(int r) {
  return r == NATPMP_ERR_NOGATEWAYSUPPORT || r == NATPMP_ERR_RECVFROM || r == NATPMP_ERR_CANNOTGETGATEWAY ||
         r == NATPMP_ERR_CONNECTERR || r == NATPMP_ERR_SENDERR || r == NATPMP_ERR_SOCKETERROR;
}

Error natpmp_error(int r, const std::string& gateway) {
  std::string where = gateway.empty() ? "" : " (gateway " + gateway + ")";
  if (r == NATPMP_ERR_CANNOTGETGATEWAY) {
    return make_error(ErrorCode::kUnavailable, "NAT-PMP: this host has no IPv4 default gateway");
  }
  if (is_silence(r)) {
    return make_error(ErrorCode::kUnavailable, "NAT-PMP: no answer" + where + ": " + strnatpmperr(r));
  }
  if (r == NATPMP_ERR_NOTAUTHORIZED) {
    return make_error(ErrorCode::kPermissionDenied, "NAT-PMP: the gateway" + where +
                                                        " refused the mapping (not authorized); allow NAT-PMP/UPnP "
                                                        "port mappings for this host in the router's settings");
  }
  if (r == NATPMP_ERR_NETWORKFAILURE) {
    return make_error(ErrorCode::kFailedPrecondition, "NAT-PMP: the gateway" + where +
                                                          " has no public address (network failure); it may itself "
                                                          "sit behind another NAT, or its internet link is down");
  }
  if (r == NATPMP_ERR_OUTOFRESOURCES) {
    return make_error(
        ErrorCode::kResourceExhausted,
        "NAT-PMP: the gateway" + where + " has no mappings left; remove unused port mappings on the router");
  }
  return make_error(ErrorCode::kInternal,
                    "NAT-PMP: the gateway" + where + " answered with an error: " + strnatpmperr(r));
}

// One libnatpmp handle, closed on scope exit.
class Session {
 public:
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    if (open_) closenatpmp(&n_);
  }

  Status open(const std::string& forced_gateway) {
    int force = 0;
    in_addr_t gw = 0;
    if (!forced_gateway.empty()) {
      in_addr a{};
      if (::inet_pton(AF_INET, forced_gateway.c_str(), &a) != 1) {
        return make_error(ErrorCode::kInvalidArgument, "NAT-PMP: '" + forced_gateway + "' is not an IPv4 address");
      }
      force = 1;
      gw = a.s_addr;
    }
    int r = initnatpmp(&n_, force, gw);
    if (r < 0) return natpmp_error(r, forced_gateway);
    open_ = true;
    gateway_ = dotted(n_.gateway);
    return ok_status();
  }

  const std::string& gateway() const { return gateway_; }
  natpmp_t* handle() { return &n_; }

  // Waits for the answer to the request just sent, retransmitting on
  // libnatpmp's schedule, until `deadline`.
  Result<natpmpresp_t> await(Clock::time_point deadline) {
    for (;;) {
      natpmpresp_t resp{};
      int r = readnatpmpresponseorretry(&n_, &resp);
      if (r == 0) return resp;
      if (r != NATPMP_TRYAGAIN) return natpmp_error(r, gateway_);
      auto now = Clock::now();
      if (now >= deadline) {
        return make_error(ErrorCode::kUnavailable, "NAT-PMP: no answer from the gateway " + gateway_);
      }
      timeval tv{};
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (getnatpmprequesttimeout(&n_, &tv) == 0) {
        auto retry = std::chrono::milliseconds(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        wait = std::min(wait, std::max(retry, std::chrono::milliseconds(1)));
      }
      pollfd p{.fd = n_.s, .events = POLLIN, .revents = 0};
      ::poll(&p, 1, static_cast<int>(wait.count()));
    }
  }

 private:
  natpmp_t n_{};
  bool open_ = false;
  std::string gateway_;
};

Result<std::string> public_address(Session& s, Clock::time_point deadline) {
  int r = sendpublicaddressrequest(s.handle());
  if (r < 0) return natpmp_error(r, s.gateway());
  auto resp = s.await(deadline);
  if (!resp.ok()) return std::move(resp).error();
  if (resp->type != NATPMP_RESPTYPE_PUBLICADDRESS) {
    return make_error(ErrorCode::kInternal, "NAT-PMP: the gateway " + s.gateway() + " sent an unexpected answer");
  }
  std::string ip = dotted(resp->pnu.publicaddress.addr.s_addr);
  if (ip == "0.0.0.0") {
    return make_error(ErrorCode::kFailedPrecondition,
                      "NAT-PMP: the gateway " + s.gateway() + " has no public address yet; check its internet link");
  }
  return ip;
}

}  // namespace

Result<NatPmpAddress> natpmp_public_address(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  Session s;
  YONDER_TRY(s.open(""));
  auto ip = public_address(s, deadline);
  if (!ip.ok()) return std::move(ip).error();
  return NatPmpAddress{.gateway = s.gateway(), .external_ip = *ip};
}

Result<Mapping> natpmp_map(uint16_t internal_port, uint16_t external_port, std::chrono::seconds lifetime,
                           std::chrono::milliseconds timeout, const std::string& gateway) {
  auto deadline = Clock::now() + timeout;
  Session s;
  YONDER_TRY(s.open(gateway));
  auto ip = public_address(s, deadline);
  if (!ip.ok()) return std::move(ip).error();
  // RFC 6886 3.3: a lifetime of 0 deletes; never ask for it here.
  auto secs = std::clamp<int64_t>(lifetime.count(), 1, UINT32_MAX);
  int r = sendnewportmappingrequest(s.handle(), NATPMP_PROTOCOL_TCP, internal_port, external_port,
                                    static_cast<uint32_t>(secs));
  if (r < 0) return natpmp_error(r, s.gateway());
  auto resp = s.await(deadline);
  if (!resp.ok()) return std::move(resp).error();
  const auto& pm = resp->pnu.newportmapping;
  if (resp->type != NATPMP_RESPTYPE_TCPPORTMAPPING || pm.privateport != internal_port || pm.mappedpublicport == 0 ||
      pm.lifetime == 0) {
    return make_error(ErrorCode::kInternal,
                      "NAT-PMP: the gateway " + s.gateway() + " answered the mapping request with something else");
  }
  Mapping m;
  m.protocol = kNatPmpName;
  m.external_ip = *ip;
  m.external_port = pm.mappedpublicport;
  m.internal_port = internal_port;
  m.lifetime = std::chrono::seconds(pm.lifetime);
  m.gateway = s.gateway();
  return m;
}

Status natpmp_unmap(const Mapping& m, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  Session s;
  YONDER_TRY(s.open(m.gateway));
  // RFC 6886 3.4: lifetime 0 and suggested external port 0 delete the
  // mapping of this internal port.
  int r = sendnewportmappingrequest(s.handle(), NATPMP_PROTOCOL_TCP, m.internal_port, 0, 0);
  if (r < 0) return natpmp_error(r, s.gateway());
  auto resp = s.await(deadline);
  if (!resp.ok()) return std::move(resp).error();
  return ok_status();
}

}  // namespace yonder::portmap::detail
