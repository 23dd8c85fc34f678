// PortMapper against a scripted gateway: state changes are awaited through
// the listener (no sleeps); the renewal deadlines are never waited out:
// refresh_now() and stop() cut the waits short.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "portmap/port_mapper.h"

namespace yonder::portmap {
namespace {

using std::chrono::seconds;

TEST(RenewalSchedule, HalfLifeWithAFloor) {
  EXPECT_EQ(RenewalSchedule::after_success(seconds(7200)), seconds(3600));
  EXPECT_EQ(RenewalSchedule::after_success(seconds(30)), seconds(60));
  EXPECT_EQ(RenewalSchedule::after_success(seconds(0)), seconds(1800));  // permanent: re-asserted
}

TEST(RenewalSchedule, BacksOffToHalfAnHour) {
  EXPECT_EQ(RenewalSchedule::after_failure(1), seconds(30));
  EXPECT_EQ(RenewalSchedule::after_failure(2), seconds(60));
  EXPECT_EQ(RenewalSchedule::after_failure(3), seconds(120));
  EXPECT_EQ(RenewalSchedule::after_failure(7), seconds(1800));
  EXPECT_EQ(RenewalSchedule::after_failure(100), seconds(1800));
}

// A gateway whose answers the test scripts; records the calls.
struct Script {
  std::mutex mu;
  std::deque<Result<Mapping>> answers;  // for map and renew, in order
  std::vector<std::string> calls;
  bool unmap_ok = true;
};

class ScriptedGateway final : public GatewayBackend {
 public:
  explicit ScriptedGateway(Script& s) : s_(s) {}
  Result<Mapping> map(uint16_t port, const MapOptions&) override { return next("map " + std::to_string(port)); }
  Result<Mapping> renew(const Mapping& m, const MapOptions&) override {
    return next("renew " + std::to_string(m.external_port));
  }
  Status unmap(const Mapping& m, const MapOptions&) override {
    std::lock_guard lock(s_.mu);
    s_.calls.push_back("unmap " + std::to_string(m.external_port));
    if (s_.unmap_ok) return ok_status();
    return make_error(ErrorCode::kUnavailable, "gateway gone");
  }

 private:
  Result<Mapping> next(std::string call) {
    std::lock_guard lock(s_.mu);
    s_.calls.push_back(std::move(call));
    if (s_.answers.empty()) return make_error(ErrorCode::kUnavailable, "script ran out");
    auto r = std::move(s_.answers.front());
    s_.answers.pop_front();
    return r;
  }
  Script& s_;
};

// Collects what the listener saw and lets the test wait for a state.
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PortMapperStatus> all;

  PortMapper::Listener listener() {
    return [this](const PortMapperStatus& s) {
      std::lock_guard lock(mu);
      all.push_back(s);
      cv.notify_all();
    };
  }
  // Waits for the n-th status (1-based) with state `st`, counting only those.
  PortMapperStatus wait_for(MapState st, int n = 1) {
    std::unique_lock lock(mu);
    PortMapperStatus found;
    cv.wait(lock, [&] {
      int k = 0;
      for (const auto& s : all) {
        if (s.state == st && ++k == n) {
          found = s;
          return true;
        }
      }
      return false;
    });
    return found;
  }
};

Mapping granted(uint16_t ext, const std::string& ip = "203.0.113.2") {
  Mapping m;
  m.protocol = kNatPmpName;
  m.external_ip = ip;
  m.external_port = ext;
  m.internal_port = 7000;
  m.lifetime = seconds(7200);
  m.gateway = "192.168.1.1";
  return m;
}

TEST(PortMapper, MapsReportsAndRemovesOnStop) {
  Script script;
  script.answers.push_back(granted(7000));
  Seen seen;
  PortMapper mapper(7000, {}, seen.listener(), std::make_unique<ScriptedGateway>(script));
  auto mapped = seen.wait_for(MapState::kMapped);
  ASSERT_TRUE(mapped.mapping);
  EXPECT_EQ(mapped.mapping->external_port, 7000);
  EXPECT_EQ(mapped.next_attempt_in, seconds(3600));
  EXPECT_TRUE(mapped.reason.empty());
  EXPECT_EQ(mapper.status().state, MapState::kMapped);
  auto j = mapper.status().to_json();
  EXPECT_EQ(j["state"], "mapped");
  EXPECT_EQ(j["mapping"]["external_port"], 7000);

  mapper.stop();
  EXPECT_EQ(mapper.status().state, MapState::kNone);
  EXPECT_EQ(script.calls, (std::vector<std::string>{"map 7000", "unmap 7000"}));
  EXPECT_EQ(seen.all.front().state, MapState::kMapping);
  mapper.stop();  // idempotent
}

TEST(PortMapper, UnavailableCarriesTheReasonAndRetriesOnRefresh) {
  Script script;
  script.answers.push_back(make_error(ErrorCode::kUnavailable, no_gateway_message("a", "b")));
  script.answers.push_back(granted(7001));
  Seen seen;
  PortMapper mapper(7000, {}, seen.listener(), std::make_unique<ScriptedGateway>(script));
  auto un = seen.wait_for(MapState::kUnavailable);
  EXPECT_NE(un.reason.find("no UPnP-IGD or NAT-PMP gateway answered"), std::string::npos);
  EXPECT_EQ(un.next_attempt_in, seconds(30));
  EXPECT_EQ(un.to_json()["state"], "unavailable");

  mapper.refresh_now();
  auto mapped = seen.wait_for(MapState::kMapped);
  EXPECT_EQ(mapped.mapping->external_port, 7001);
  mapper.stop();
  EXPECT_EQ(script.calls, (std::vector<std::string>{"map 7000", "map 7000", "unmap 7001"}));
}

TEST(PortMapper, RenewsAndMapsAfreshWhenRenewalFails) {
  Script script;
  script.answers.push_back(granted(7000));
  script.answers.push_back(granted(7000));                                    // renewal
  script.answers.push_back(make_error(ErrorCode::kUnavailable, "rebooted"));  // renewal fails...
  script.answers.push_back(granted(7002));                                    // ...mapped afresh
  Seen seen;
  PortMapper mapper(7000, {}, seen.listener(), std::make_unique<ScriptedGateway>(script));
  seen.wait_for(MapState::kMapped, 1);
  mapper.refresh_now();
  seen.wait_for(MapState::kMapped, 2);
  mapper.refresh_now();
  auto third = seen.wait_for(MapState::kMapped, 3);
  EXPECT_EQ(third.mapping->external_port, 7002);
  mapper.stop();
  EXPECT_EQ(script.calls, (std::vector<std::string>{"map 7000", "renew 7000", "renew 7000", "map 7000", "unmap 7002"}));
}

TEST(PortMapper, WarnsAboutDoubleNat) {
  Script script;
  script.answers.push_back(granted(7000, "100.64.3.4"));
  Seen seen;
  PortMapper mapper(7000, {}, seen.listener(), std::make_unique<ScriptedGateway>(script));
  auto mapped = seen.wait_for(MapState::kMapped);
  EXPECT_NE(mapped.reason.find("behind another NAT"), std::string::npos);
}

TEST(PortMapper, AFailedRemovalIsReported) {
  Script script;
  script.answers.push_back(granted(7000));
  script.unmap_ok = false;
  Seen seen;
  PortMapper mapper(7000, {}, seen.listener(), std::make_unique<ScriptedGateway>(script));
  seen.wait_for(MapState::kMapped);
  mapper.stop();
  auto last = mapper.status();
  EXPECT_EQ(last.state, MapState::kNone);
  EXPECT_NE(last.reason.find("could not remove the mapping"), std::string::npos);
}

}  // namespace
}  // namespace yonder::portmap
