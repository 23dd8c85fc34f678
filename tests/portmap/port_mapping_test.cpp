#include <gtest/gtest.h>

#include "portmap/port_mapping.h"

namespace yonder::portmap {
namespace {

Mapping sample() {
  Mapping m;
  m.protocol = kUpnpIgdName;
  m.external_ip = "203.0.113.2";
  m.external_port = 40000;
  m.internal_port = 40001;
  m.lifetime = std::chrono::seconds(7200);
  m.gateway = "http://192.168.1.1:5000/rootDesc.xml";
  m.internal_client = "192.168.1.10";
  return m;
}

TEST(Mapping, JsonRoundTrip) {
  auto m = Mapping::from_json(sample().to_json());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->to_json(), sample().to_json());
  EXPECT_EQ(m->external_port, 40000);
  EXPECT_EQ(m->internal_client, "192.168.1.10");
}

TEST(Mapping, FromJsonRejectsWrongShapes) {
  auto with = [](const char* key, nlohmann::json v) {
    auto j = sample().to_json();
    j[key] = std::move(v);
    return Mapping::from_json(j);
  };
  EXPECT_FALSE(Mapping::from_json(nlohmann::json::array()).ok());
  EXPECT_FALSE(with("protocol", "pcp").ok());
  EXPECT_FALSE(with("external_port", 0).ok());
  EXPECT_FALSE(with("external_port", 70000).ok());
  EXPECT_FALSE(with("internal_port", -1).ok());
  EXPECT_FALSE(with("lifetime_s", "long").ok());
  EXPECT_FALSE(with("gateway", "").ok());
  auto j = sample().to_json();
  j.erase("external_ip");
  EXPECT_FALSE(Mapping::from_json(j).ok());
}

TEST(PortMapping, PrivateAddressesAreTold) {
  for (const char* a : {"10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.1.1",
                        "127.0.0.1", "169.254.3.4", "0.0.0.0"}) {
    EXPECT_TRUE(is_private_ipv4(a)) << a;
  }
  for (const char* a : {"203.0.113.2", "8.8.8.8", "172.32.0.1", "100.128.0.1", "11.0.0.1", "not an address"}) {
    EXPECT_FALSE(is_private_ipv4(a)) << a;
  }
}

TEST(PortMapping, NoGatewayMessageSaysWhatToDo) {
  auto msg = no_gateway_message("NAT-PMP: no answer", "UPnP-IGD: no device answered");
  EXPECT_NE(msg.find("no UPnP-IGD or NAT-PMP gateway answered"), std::string::npos);
  EXPECT_NE(msg.find("enable UPnP or NAT-PMP on the router"), std::string::npos);
  EXPECT_NE(msg.find("relay"), std::string::npos);
  EXPECT_NE(msg.find("NAT-PMP: no answer"), std::string::npos);
}

TEST(PortMapping, MapRefusesPortZero) {
  auto m = map_tcp_port(0, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kInvalidArgument);
}

TEST(ProbeResult, JsonShowsAnswersAndAdvice) {
  ProbeResult r;
  r.natpmp.error = "NAT-PMP: no answer";
  r.upnp.error = "UPnP-IGD: no device answered";
  auto j = r.to_json();
  EXPECT_FALSE(j["nat_pmp"]["available"].get<bool>());
  EXPECT_TRUE(j.contains("advice"));
  r.upnp = {.available = true, .external_ip = "100.64.1.2", .gateway = "http://192.168.1.1/x.xml", .error = ""};
  j = r.to_json();
  EXPECT_FALSE(j.contains("advice"));
  EXPECT_TRUE(j["upnp_igd"]["double_nat"].get<bool>());
  EXPECT_EQ(j["upnp_igd"]["external_ip"], "100.64.1.2");
}

}  // namespace
}  // namespace yonder::portmap
