// The peer link between real daemons: each node in its own YONDER_HOME, TLS
// over real loopback sockets, driven through the CLI as people use it.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <set>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "crypto/identity.h"
#include "net/link/tls_context.h"
#include "support/docker_env.h"
#include "support/live_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

// One node: a state folder, its daemon, and a way to run `yonder` on it.
class Node {
 public:
  Node(const TempDir& dir, const std::string& name, const Env& extra = {}) {
    env_ = {{"YONDER_HOME", dir / name},
            {"YONDER_CONFIG", ""},
            {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
            {"YONDER_GPU_INVENTORY", "fake:1"},
            {"YONDER_PASSPHRASE", ""}};
    for (const auto& [k, v] : extra) env_[k] = v;
    auto r = yonder({"init", "--name", name, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    id_ = json::parse(r.out)["node_id"];
    daemon_ = std::make_unique<Daemon>(env_);
    EXPECT_TRUE(daemon_->ready()) << daemon_->log();
  }
  RunResult yonder(std::vector<std::string> args) const {
    args.insert(args.begin(), program_path("yonder"));
    return run(args, env_);
  }
  json yonder_json(std::vector<std::string> args) const {
    args.push_back("--json");
    auto r = yonder(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  int link_port() const { return yonder_json({"status"})["link_port"]; }
  std::string share(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"share"};
    args.insert(args.end(), extra.begin(), extra.end());
    return yonder_json(args)["link"];
  }
  json peers() const { return yonder_json({"peers"})["peers"]; }
  const std::string& id() const { return id_; }
  const Env& env() const { return env_; }
  Daemon& daemon() { return *daemon_; }

 private:
  Env env_;
  std::string id_;
  std::unique_ptr<Daemon> daemon_;
};

TEST(PeerLink, PairingHappyPath) {
  TempDir dir;
  Node studio(dir, "studio", {{"YONDER_GPU_INVENTORY", "fake:2"}}), laptop(dir, "laptop");
  std::string link = studio.share({"--scope", "run,exec", "--gpus", "2", "--vram", "20G"});
  auto r = laptop.yonder({"pair", link, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto paired = json::parse(r.out);
  EXPECT_EQ(paired["peer"], studio.id());
  EXPECT_EQ(paired["name"], "studio");
  EXPECT_EQ(paired["summary"], "run,exec; 2 GPUs, 20 GiB VRAM, 2h, 1 job, no egress");
  std::string sas = paired["short_auth_string"];
  EXPECT_EQ(sas.size(), 11u);
  // The provider shows the same string for this session (it logs it just
  // after its answer, so the line may land after `pair` returned).
  EXPECT_TRUE(wait_until([&] { return studio.daemon().log().find(sas) != std::string::npos; }))
      << "the provider never logged the short authentication string " << sas;
  EXPECT_NE(studio.daemon().log().find(sas), std::string::npos) << studio.daemon().log();

  auto on_studio = studio.peers();
  ASSERT_EQ(on_studio.size(), 1u);
  EXPECT_EQ(on_studio[0]["node_id"], laptop.id());
  EXPECT_EQ(on_studio[0]["name"], "laptop");
  EXPECT_EQ(on_studio[0]["grant"]["capabilities"], "run,exec");
  auto on_laptop = laptop.peers();
  ASSERT_EQ(on_laptop.size(), 1u);
  EXPECT_EQ(on_laptop[0]["node_id"], studio.id());
  EXPECT_EQ(on_laptop[0]["granted_to_us"]["gpus"], 2);
  EXPECT_EQ(on_laptop[0]["grant"]["capabilities"], "");  // the laptop shares nothing back

  // A request over the link, then the human listings.
  auto info = laptop.yonder({"call", "studio", "node.info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(json::parse(info.out)["node_id"], studio.id());
  EXPECT_EQ(json::parse(info.out)["name"], "studio");
  auto links = studio.yonder_json({"links"})["links"];
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0]["state"], "used");
  EXPECT_EQ(studio.yonder_json({"status"})["peers"], 1);
  // The consumer's table says what the provider lets it do; the
  // provider's says how many of the link's uses are spent.
  auto peers = laptop.yonder({"peers"});
  ASSERT_EQ(peers.exit_code, 0) << peers.err;
  EXPECT_NE(peers.out.find("we may (there): run,exec; 2 GPUs, 20 GiB VRAM"), std::string::npos) << peers.out;
  auto listed = studio.yonder({"links"});
  EXPECT_NE(listed.out.find("1 of 1"), std::string::npos) << listed.out;
  // Either side shows the pairing's check digits later, by name or id prefix,
  // to compare aloud; a mistyped name is refused with a suggestion.
  auto on_studio_one = studio.yonder({"peers", "laptop"});
  ASSERT_EQ(on_studio_one.exit_code, 0) << on_studio_one.err;
  EXPECT_NE(on_studio_one.out.find("Check digits  " + sas), std::string::npos) << on_studio_one.out;
  auto on_laptop_one = laptop.yonder({"peers", studio.id().substr(0, 7)});
  ASSERT_EQ(on_laptop_one.exit_code, 0) << on_laptop_one.err;
  EXPECT_NE(on_laptop_one.out.find("Check digits  " + sas), std::string::npos) << on_laptop_one.out;
  EXPECT_NE(on_laptop_one.out.find("We may there  run,exec; 2 GPUs"), std::string::npos) << on_laptop_one.out;
  auto mistyped = laptop.yonder({"peers", "studoi"});
  EXPECT_NE(mistyped.exit_code, 0);
  EXPECT_NE(mistyped.err.find("no paired peer \"studoi\"; did you mean `studio`?"), std::string::npos) << mistyped.err;
  auto ping = laptop.yonder({"ping", "studio", "-c", "3", "-i", "0.01"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err;
  EXPECT_NE(ping.out.find("time="), std::string::npos);
  // These nodes listen on loopback only: share says the link reaches only this machine.
  auto shared = studio.yonder({"share", "--no-qr", "--uses", "2", "--label", "probe"});
  ASSERT_EQ(shared.exit_code, 0) << shared.err;
  EXPECT_NE(shared.err.find("this link reaches only this machine"), std::string::npos) << shared.err;
}

// `yonder gpu PEER`: a consumer sees the provider's GPUs, what it may do
// there and the provider's limits, before it runs anything; a peer whose
// scope there lacks `run` is refused.
TEST(PeerLink, ShareWaitPrintsWhoPairedAndTheCheckDigitsTheConsumerSaw) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  LiveProcess share({program_path("yonder"), "share", "--wait", "--no-qr"}, studio.env());
  ASSERT_TRUE(share.wait_for("send it privately", std::chrono::seconds(30))) << share.output();
  ASSERT_TRUE(share.wait_for("Waiting for the link to be used", std::chrono::seconds(30))) << share.output();
  size_t at = share.out().find("yonder://");
  ASSERT_NE(at, std::string::npos) << share.out();
  std::string link = share.out().substr(at, share.out().find('\n', at) - at);
  auto r = laptop.yonder({"pair", link, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string sas = json::parse(r.out)["short_auth_string"];
  ASSERT_EQ(share.wait(std::chrono::seconds(60)), 0) << share.output();
  EXPECT_NE(share.out().find("Paired with \"laptop\" (node id " + laptop.id() + ")"), std::string::npos)
      << share.out();
  EXPECT_NE(share.out().find("check    " + sas + "  (compare"), std::string::npos) << share.out();
  // A link that ends unused ends the wait with the reason.
  LiveProcess second({program_path("yonder"), "share", "--wait", "--no-qr", "--json"}, studio.env());
  ASSERT_TRUE(second.wait_for("\n}\n", std::chrono::seconds(30))) << second.output();  // the link, as JSON
  ASSERT_TRUE(second.wait_for("Waiting for the link", std::chrono::seconds(30))) << second.output();
  std::string id = json::parse(second.out(), nullptr, false).value("id", "");
  ASSERT_FALSE(id.empty()) << second.out();
  ASSERT_EQ(studio.yonder({"links", "revoke", id}).exit_code, 0);
  EXPECT_EQ(second.wait(std::chrono::seconds(60)), 1);
  EXPECT_NE(second.err().find("is revoked and was not used"), std::string::npos) << second.err();
}

TEST(PeerLink, GpuPeerShowsTheProvidersGpusAndWhatWeMayDoThere) {
  if (!docker_answers()) {
    if (docker_required()) FAIL() << "Docker is required (YONDER_REQUIRE_DOCKER=1) but does not answer";
    GTEST_SKIP() << "no Docker engine: the provider's job manager does not start";
  }
  TempDir dir;
  Node studio(dir, "studio", {{"YONDER_GPU_INVENTORY", "fake:2"}}), laptop(dir, "laptop"), other(dir, "other");
  ASSERT_EQ(laptop.yonder({"pair", studio.share({"--scope", "run,exec", "--gpus", "1", "--vram", "20G"})}).exit_code,
            0);
  auto offer = laptop.yonder_json({"gpu", "studio"});
  ASSERT_TRUE(offer.contains("inventory")) << offer.dump();
  EXPECT_EQ(offer["name"], "studio");
  EXPECT_EQ(offer["inventory"]["source"], "fake");
  EXPECT_EQ(offer["inventory"]["devices"].size(), 2u);
  EXPECT_EQ(offer["scope"]["gpus"], 1);
  EXPECT_EQ(offer["running"], 0);
  EXPECT_TRUE(offer["images"].is_array() && !offer["images"].empty()) << offer.dump();
  EXPECT_GT(offer["limits"].value("max_memory_mib", 0), 0);
  auto text = laptop.yonder({"gpus", "studio"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("We may:   run,exec; 1 GPU, 20 GiB VRAM"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("free"), std::string::npos) << text.out;

  // A grant of more GPUs per job than the node has could never be met.
  auto too_many = studio.yonder({"share", "--gpus", "5", "--no-qr"});
  EXPECT_NE(too_many.exit_code, 0);
  EXPECT_NE(too_many.err.find("this node has 2 GPUs"), std::string::npos) << too_many.err;
  EXPECT_NE(too_many.err.find("--gpus 2 or fewer"), std::string::npos) << too_many.err;
  auto widened = studio.yonder({"scope", "laptop", "--gpus", "3"});
  EXPECT_NE(widened.exit_code, 0);
  EXPECT_NE(widened.err.find("this node has 2 GPUs"), std::string::npos) << widened.err;
  EXPECT_EQ(studio.yonder({"scope", "laptop", "--gpus", "2"}).exit_code, 0);

  ASSERT_EQ(other.yonder({"pair", studio.share({"--scope", "files"})}).exit_code, 0);
  auto refused = other.yonder({"gpu", "studio"});
  EXPECT_EQ(refused.exit_code, 5) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("run"), std::string::npos) << refused.err;
}

TEST(PeerLink, ReplayedLinkIsRejected) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop"), stranger(dir, "stranger");
  std::string link = studio.share();
  ASSERT_EQ(laptop.yonder({"pair", link}).exit_code, 0);
  auto replay = stranger.yonder({"pair", link});
  EXPECT_NE(replay.exit_code, 0);
  EXPECT_NE(replay.err.find("used already"), std::string::npos) << replay.err;
  EXPECT_EQ(studio.peers().size(), 1u);
}

TEST(PeerLink, ExpiredTamperedTruncatedRevokedLinksGiveDistinctMessages) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  std::string good = studio.share({"--uses", "5"});

  std::string tampered = good;
  tampered[30] = tampered[30] == 'A' ? 'B' : 'A';
  auto t = laptop.yonder({"pair", tampered});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_NE(t.err.find("altered"), std::string::npos) << t.err;

  auto cut = laptop.yonder({"pair", good.substr(0, good.size() - 30)});
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_NE(cut.err.find("truncated"), std::string::npos) << cut.err;

  json created = studio.yonder_json({"links"})["links"][0];
  // A link is named as a job is: by a unique start of its id.
  auto too_short = studio.yonder({"links", "revoke", created["id"].get<std::string>().substr(0, 2)});
  EXPECT_NE(too_short.exit_code, 0);
  EXPECT_NE(too_short.err.find("give at least 4 characters"), std::string::npos) << too_short.err;
  ASSERT_EQ(studio.yonder({"links", "revoke", created["id"].get<std::string>().substr(0, 8)}).exit_code, 0);
  auto revoked = laptop.yonder({"pair", good});
  EXPECT_NE(revoked.exit_code, 0);
  EXPECT_NE(revoked.err.find("revoked"), std::string::npos) << revoked.err;

  // Expiry: a one-second link, used once the provider itself lists it expired.
  std::string short_lived = studio.share({"--expires", "1s"});
  json links;
  bool expired = wait_until([&] {
    links = studio.yonder_json({"links"})["links"];
    for (const auto& l : links) {
      if (l["state"] == "expired") return true;
    }
    return false;
  });
  ASSERT_TRUE(expired) << links.dump();
  auto late = laptop.yonder({"pair", short_lived});
  EXPECT_NE(late.exit_code, 0);
  EXPECT_NE(late.err.find("expired"), std::string::npos) << late.err;
  EXPECT_TRUE(studio.peers().empty());
}

TEST(PeerLink, ManInTheMiddleWithItsOwnKeyIsRejected) {
  TempDir dir;
  Node mallory(dir, "mallory");
  // The studio's links name an address where mallory answers instead.
  Node studio(dir, "studio", {{"YONDER_LINK_ADVERTISE", "127.0.0.1:" + std::to_string(mallory.link_port())}});
  Node laptop(dir, "laptop");
  mallory.share();  // mallory is willing to pair strangers, so its TLS side would accept
  std::string link = studio.share();
  auto r = laptop.yonder({"pair", link});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("different key"), std::string::npos) << r.err;
  EXPECT_TRUE(mallory.peers().empty());
  EXPECT_TRUE(laptop.peers().empty());
  EXPECT_EQ(studio.yonder_json({"links"})["links"][0]["uses_left"], 1);
}

// A raw TLS client with a key the node never paired.
struct RawDial {
  int bytes_read = 0;
  bool handshake_ok = false;
};

RawDial dial_raw(int port, bool send_garbage) {
  RawDial out;
  auto id = Identity::generate().value();
  auto ctx = link::TlsContext::create(id, false).value();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // Bound the wait for bytes that must never come.
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  SSL* ssl = SSL_new(ctx->native());
  link::TlsContext::set_policy(ssl, [](const PublicKeyBytes&) { return link::KeyVerdict::kPinned; });
  SSL_set_fd(ssl, fd);
  out.handshake_ok = SSL_connect(ssl) == 1;
  if (out.handshake_ok) {
    if (send_garbage) {
      const char junk[] = "\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05hello";
      SSL_write(ssl, junk, sizeof junk - 1);
    }
    char buf[4096];
    for (;;) {
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) break;
      out.bytes_read += n;
    }
  }
  SSL_free(ssl);
  ::close(fd);
  return out;
}

TEST(PeerLink, UnpairedDialerReadsZeroApplicationBytes) {
  TempDir dir;
  Node studio(dir, "studio");
  // No link outstanding: the handshake itself is refused.
  auto refused = dial_raw(studio.link_port(), false);
  EXPECT_EQ(refused.bytes_read, 0);
  // With a link outstanding an unknown key may try to pair, but it still
  // reads nothing unless it presents a valid link.
  studio.share();
  auto silent = dial_raw(studio.link_port(), false);
  EXPECT_EQ(silent.bytes_read, 0);
  auto garbage = dial_raw(studio.link_port(), true);
  EXPECT_EQ(garbage.bytes_read, 0);
  EXPECT_TRUE(studio.peers().empty());
}

TEST(PeerLink, ScopeIsCheckedOnEveryRequest) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  ASSERT_EQ(laptop.yonder({"pair", studio.share({"--scope", "exec,files"})}).exit_code, 0);
  auto run = laptop.yonder({"call", "studio", "run.submit"});
  EXPECT_EQ(run.exit_code, 5);
  EXPECT_NE(run.err.find("not permitted"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("\"run\""), std::string::npos) << run.err;
  // Its other capabilities pass authorisation (and reach their handlers).
  auto exec = laptop.yonder({"call", "studio", "exec.open"});
  EXPECT_EQ(exec.err.find("not permitted"), std::string::npos) << exec.err;
  EXPECT_EQ(laptop.yonder({"call", "studio", "node.info"}).exit_code, 0);
  // A scope change applies to the very next request on the same session.
  ASSERT_EQ(studio.yonder({"allow", "laptop", "run"}).exit_code, 0);
  auto again = laptop.yonder({"call", "studio", "run.submit"});
  EXPECT_EQ(again.err.find("not permitted"), std::string::npos) << again.err;
  ASSERT_EQ(studio.yonder({"scope", "laptop", "--remove", "exec"}).exit_code, 0);
  EXPECT_EQ(laptop.yonder({"call", "studio", "exec.open"}).exit_code, 5);
}

TEST(PeerLink, DenyClosesAnOpenStreamWithinASecond) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  ASSERT_EQ(laptop.yonder({"pair", studio.share()}).exit_code, 0);
  // A long ping keeps one echo stream open for ~20 s.
  auto ping = std::async(std::launch::async, [&] {
    auto r = laptop.yonder({"ping", "studio", "-c", "200", "-i", "0.1"});
    return std::make_pair(r, std::chrono::steady_clock::now());
  });
  // Wait until the studio sees the stream.
  bool open = wait_until([&] {
    for (const auto& p : studio.peers()) {
      if (p["streams"].get<int>() > 0) return true;
    }
    return false;
  });
  ASSERT_TRUE(open) << studio.peers().dump();
  auto denied = studio.yonder({"deny", "laptop"});
  auto denied_at = std::chrono::steady_clock::now();
  ASSERT_EQ(denied.exit_code, 0) << denied.err;
  auto [result, ended_at] = ping.get();
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("removed this node's access"), std::string::npos) << result.err;
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(ended_at - denied_at);
  RecordProperty("deny_to_stream_closed_ms", static_cast<int>(took.count()));
  EXPECT_LT(took.count(), 1000) << "the stream stayed open " << took.count() << " ms after deny";
  // And the laptop cannot come back.
  auto after = laptop.yonder({"call", "studio", "node.info"});
  EXPECT_NE(after.exit_code, 0);
  EXPECT_NE(after.err.find("refused"), std::string::npos) << after.err;
  // Until the operator lifts the deny: the same key, the grant it had.
  auto allowed = studio.yonder({"allow", "laptop"});
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.out.find("Allowed"), std::string::npos) << allowed.out;
  auto back = laptop.yonder({"call", "studio", "node.info"});
  EXPECT_EQ(back.exit_code, 0) << back.err;
  // Each change of trust is in the studio's audit log, the pairing with the
  // check digits both sides were shown.
  std::set<std::string> actions;
  json entries = studio.yonder_json({"audit"})["entries"];
  for (const auto& e : entries) {
    actions.insert(e.value("action", ""));
    if (e.value("action", "") == "trust.pair") {
      EXPECT_EQ(e["detail"].value("check_digits", "").size(), 11u) << e.dump();  // "123 456 789"
    }
  }
  for (const char* a : {"trust.link_create", "trust.pair", "trust.deny", "trust.allow"}) {
    EXPECT_EQ(actions.count(a), 1u) << a << " missing from " << entries.dump();
  }
}

TEST(PeerLink, RequestsAreRateLimitedPerPeer) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  // A tight budget on the studio: 3 requests in a burst, then 1 per 100 s.
  ASSERT_EQ(studio.yonder({"config", "set", "link.rate_burst", "3"}).exit_code, 0);
  ASSERT_EQ(studio.yonder({"config", "set", "link.rate_per_second", "0"}).exit_code, 0);
  ASSERT_EQ(studio.daemon().stop(), 0);
  Daemon restarted(Env{{"YONDER_HOME", dir / "studio"}, {"YONDER_CONFIG", ""}, {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
                       {"YONDER_GPU_INVENTORY", "fake:1"}});
  ASSERT_TRUE(restarted.ready()) << restarted.log();
  ASSERT_EQ(laptop.yonder({"pair", studio.share()}).exit_code, 0);
  int ok = 0, limited = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = laptop.yonder({"call", "studio", "node.info"});
    if (r.exit_code == 0) ++ok;
    if (r.err.find("too many requests") != std::string::npos) ++limited;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(limited, 3);
}

TEST(PeerLink, SpeedTestMovesBytesIntact) {
  TempDir dir;
  Node studio(dir, "studio"), laptop(dir, "laptop");
  ASSERT_EQ(laptop.yonder({"pair", studio.share()}).exit_code, 0);
  auto r = laptop.yonder_json({"speedtest", "studio", "--bytes", "64M", "--streams", "8"});
  EXPECT_EQ(r["bytes"], 64u << 20);
}

}  // namespace
}  // namespace yonder::testing
