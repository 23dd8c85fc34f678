// Reputation from real SQLite stores (mesh/consumer/mesh_opinions.h,
// jobs/metering/verifications.h): each node's own evidence, encoded as mesh.opinions
// would answer it, decoded and verified by the fetcher, fed to EigenTrust.
// Throwaway keys; the stores are real (migrated databases in a temp dir).
#include <gtest/gtest.h>

#include <array>

#include "crypto/node_id.h"
#include "jobs/metering/verifications.h"
#include "jobs/receipts/receipt_store.h"
#include "mesh/consumer/mesh_opinions.h"
#include "mesh/core/reputation.h"
#include "mesh/core/verification.h"
#include "state/node_state.h"
#include "support/temp_dir.h"

namespace yonder::mesh {
namespace {

using jobs::receipts::ReceiptState;
using jobs::receipts::ReceiptStore;
using jobs::receipts::StoredReceipt;
constexpr mesh::UnixMs kNow = 1'800'000'000'000;

Identity throwaway(uint8_t n) {
  std::array<uint8_t, 32> seed{};
  seed[0] = n;
  seed[31] = 0x77;
  return Identity::from_seed(ByteView(seed.data(), seed.size())).value();
}

std::string id_of(const Identity& i) {
  return NodeId(i.public_key()).to_string();
}

// One node: its identity and its two stores in its own database.
struct Node {
  explicit Node(uint8_t n, const std::string& dir) : id(throwaway(n)) {
    std::string db = dir + "/node" + std::to_string(n) + ".db";
    EXPECT_TRUE(state::prepare_database(db).ok());
    receipts = ReceiptStore::open(db).value();
    verifications = jobs::metering::Verifications::open(db, id).value();
  }
  // What mesh.opinions answers, as the fetcher keeps it.
  mesh::Opinions as_seen_by_peer() {
    auto own = mesh::own_opinions(*receipts, *verifications);
    EXPECT_TRUE(own.ok());
    auto decoded = mesh::decode_opinions(mesh::encode_opinions(*own));
    EXPECT_TRUE(decoded.ok());
    return mesh::verified_opinions(std::move(*decoded), id.public_key());
  }
  Identity id;
  std::unique_ptr<ReceiptStore> receipts;
  std::unique_ptr<jobs::metering::Verifications> verifications;
};

// A countersigned receipt of `gpu_seconds` that `provider` served `consumer`,
// stored on both sides (as the metering code does).
void served(Node& provider, Node& consumer, const std::string& job, uint64_t gpu_seconds) {
  mesh::Receipt r;
  r.job_id = job;
  r.consumer = consumer.id.public_key();
  r.gpu_model = "NVIDIA GeForce RTX 4090";
  r.gpu_seconds = gpu_seconds;
  r.start_ms = kNow - static_cast<mesh::UnixMs>(gpu_seconds) * 1000;
  r.end_ms = kNow;
  r.output_hash = std::string(64, 'a');
  mesh::sign_receipt_as_provider(r, provider.id);
  ASSERT_TRUE(mesh::countersign_receipt(r, consumer.id).ok());
  for (Node* side : {&provider, &consumer}) {
    StoredReceipt s;
    s.provider_id = id_of(provider.id);
    s.job_id = job;
    s.consumer_id = id_of(consumer.id);
    s.we_provided = side == &provider;
    s.state = ReceiptState::kCountersigned;
    s.receipt_json = mesh::encode_receipt(r);
    ASSERT_TRUE(side->receipts->put(s).ok());
  }
}

TEST(NodeReputation, VerificationsAreSignedStoredAndListedNewestFirst) {
  testing::TempDir dir;
  Node me(1, dir.path()), p(2, dir.path());
  auto a = me.verifications->record(id_of(p.id), mesh::CheckKind::kKnownAnswer, "bench-1", mesh::CheckOutcome::kPassed,
                                    {{"seconds", 0.25}, {"gpu_model", "RTX 4090"}}, kNow);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  auto b = me.verifications->record(id_of(p.id), mesh::CheckKind::kReplica, "mj-1", mesh::CheckOutcome::kOutvoted, {},
                                    kNow + 1);
  ASSERT_TRUE(b.ok());
  auto rows = me.verifications->list();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].subject, "mj-1");
  EXPECT_EQ((*rows)[1].details.value("gpu_model", ""), "RTX 4090");
  auto v = mesh::decode_verification((*rows)[1].signed_json);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(mesh::verify_verification(*v).ok());
  EXPECT_EQ(v->reporter, me.id.public_key());
  EXPECT_EQ(me.verifications->list(id_of(me.id))->size(), 0u);
  EXPECT_EQ(me.verifications->list(id_of(p.id), 1)->size(), 1u);
  // Refused: not a node id; an outcome of the wrong kind; a bad subject; a check of oneself.
  EXPECT_FALSE(me.verifications->record("nobody", mesh::CheckKind::kReplica, "x", mesh::CheckOutcome::kAgreed).ok());
  EXPECT_FALSE(me.verifications->record(id_of(p.id), mesh::CheckKind::kReplica, "x", mesh::CheckOutcome::kPassed).ok());
  EXPECT_FALSE(
      me.verifications->record(id_of(p.id), mesh::CheckKind::kReplica, "a b", mesh::CheckOutcome::kAgreed).ok());
  EXPECT_FALSE(
      me.verifications->record(id_of(me.id), mesh::CheckKind::kReplica, "x", mesh::CheckOutcome::kAgreed).ok());
  EXPECT_EQ(me.verifications->list()->size(), 2u);
}

// The honest group: me (pre-trusted), providers h1 and h2 that served me and
// another honest consumer. The clique c1..c3 sign huge receipts among
// themselves and report h1 outvoted; c1 also answers mesh.opinions with all
// of it. None of it may give the clique standing with me, or cost h1.
TEST(NodeReputation, CliqueOfFakeReceiptsGainsNoStandingWithHonestMembers) {
  testing::TempDir dir;
  Node me(1, dir.path()), h1(2, dir.path()), h2(3, dir.path()), other(4, dir.path());
  Node c1(5, dir.path()), c2(6, dir.path()), c3(7, dir.path());
  served(h1, me, "j1", 3600);
  served(h2, me, "j2", 1800);
  served(h2, other, "j3", 600);
  served(h1, other, "j4", 600);
  // The clique: a year of fake work back and forth.
  int n = 0;
  for (Node* a : {&c1, &c2, &c3}) {
    for (Node* b : {&c1, &c2, &c3}) {
      if (a != b) served(*a, *b, "fake-" + std::to_string(n++), 365ull * 24 * 3600);
    }
  }
  for (Node* c : {&c1, &c2, &c3}) {
    ASSERT_TRUE(c->verifications
                    ->record(id_of(h1.id), mesh::CheckKind::kReplica, "mj-lie", mesh::CheckOutcome::kOutvoted, {}, kNow)
                    .ok());
    ASSERT_TRUE(c->verifications
                    ->record(id_of(c == &c1 ? c2.id : c1.id), mesh::CheckKind::kKnownAnswer, "bench-lie",
                             mesh::CheckOutcome::kPassed, {}, kNow)
                    .ok());
  }
  // c1 also relays receipts between c2 and c3 (not a party: dropped) and a
  // receipt with a forged countersignature.
  mesh::Opinions c1_sent = c1.as_seen_by_peer();
  auto c2_all = mesh::own_opinions(*c2.receipts, *c2.verifications).value();
  auto relayed = mesh::encode_opinions(c2_all);
  auto relayed_seen = mesh::verified_opinions(mesh::decode_opinions(relayed).value(), c1.id.public_key());
  EXPECT_GT(relayed_seen.dropped, 0u);
  std::map<mesh::PeerKey, mesh::Opinions> fetched = {
      {h1.id.public_key(), h1.as_seen_by_peer()},       {h2.id.public_key(), h2.as_seen_by_peer()},
      {other.id.public_key(), other.as_seen_by_peer()}, {c1.id.public_key(), c1_sent},
      {c2.id.public_key(), c2.as_seen_by_peer()},       {c3.id.public_key(), c3.as_seen_by_peer()}};
  auto own = mesh::own_opinions(*me.receipts, *me.verifications).value();
  auto pre = mesh::pre_trusted_peers(me.id.public_key(), {});
  ASSERT_EQ(pre.size(), 1u);
  mesh::TrustResult trust = mesh::trust_from(own, fetched, pre);
  ASSERT_TRUE(trust.converged);
  for (Node* c : {&c1, &c2, &c3}) EXPECT_LT(trust.normalised(c->id.public_key()), 1e-9);
  EXPECT_GT(trust.normalised(h1.id.public_key()), 0.5);
  EXPECT_GT(trust.normalised(h2.id.public_key()), 0.2);
  // The same without the clique: h1's standing is what it was.
  std::map<mesh::PeerKey, mesh::Opinions> honest = {{h1.id.public_key(), h1.as_seen_by_peer()},
                                                    {h2.id.public_key(), h2.as_seen_by_peer()},
                                                    {other.id.public_key(), other.as_seen_by_peer()}};
  mesh::TrustResult clean = mesh::trust_from(own, honest, pre);
  EXPECT_NEAR(clean.normalised(h1.id.public_key()), trust.normalised(h1.id.public_key()), 1e-9);
}

TEST(NodeReputation, OwnChecksMoveStandingAndGroupAdminsArePreTrusted) {
  testing::TempDir dir;
  Node me(1, dir.path()), good(2, dir.path()), bad(3, dir.path()), owner(4, dir.path());
  // No receipts at all: a passed benchmark gives standing, a failed one none.
  ASSERT_TRUE(me.verifications
                  ->record(id_of(good.id), mesh::CheckKind::kKnownAnswer, "b1", mesh::CheckOutcome::kPassed, {}, kNow)
                  .ok());
  ASSERT_TRUE(me.verifications
                  ->record(id_of(bad.id), mesh::CheckKind::kKnownAnswer, "b2", mesh::CheckOutcome::kFailed, {}, kNow)
                  .ok());
  auto own = mesh::own_opinions(*me.receipts, *me.verifications).value();
  auto t = mesh::trust_from(own, {}, mesh::pre_trusted_peers(me.id.public_key(), {}));
  EXPECT_GT(t.normalised(good.id.public_key()), 0.0);
  EXPECT_EQ(t.normalised(bad.id.public_key()), 0.0);
  // A group's owner and admins are pre-trusted; plain members are not.
  mesh::Membership m;
  m.owner = owner.id.public_key();
  mesh::Member admin, member;
  admin.id = good.id.public_key();
  admin.role = mesh::MemberRole::kAdmin;
  member.id = bad.id.public_key();
  m.members = {admin, member};
  auto pre = mesh::pre_trusted_peers(me.id.public_key(), {m});
  EXPECT_EQ(pre.size(), 3u);
  EXPECT_EQ(std::count(pre.begin(), pre.end(), bad.id.public_key()), 0);
}

}  // namespace
}  // namespace yonder::mesh
