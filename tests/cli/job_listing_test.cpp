// What `ps` and `inspect` show (cli/job_listing.h): docker's filters and
// order, the CREATED and DURATION columns, inspect's first fields.
#include "cli/job_listing.h"

#include <gtest/gtest.h>

namespace yonder::cli {
namespace {

using nlohmann::json;

json listing_job(const std::string& id, const std::string& state, int64_t submitted) {
  return {{"job_id", id},
          {"state", state},
          {"submitted_at", submitted},
          {"provider", "abcdef0123"},
          {"provider_name", "studio"},
          {"image", "img:1"}};
}

std::vector<std::string> listing_ids(const std::vector<json>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r["job_id"]);
  return out;
}

TEST(PsRows, AreNewestFirst) {
  json listing = {
      {"jobs", {listing_job("a", "running", 10), listing_job("b", "running", 20), listing_job("c", "running", 20)}}};
  EXPECT_EQ(listing_ids(ps_rows(listing, {})), (std::vector<std::string>{"c", "b", "a"}));
}

TEST(PsFilter, OneKeysValuesAreAlternativesAndKeysMustAllMatch) {
  json listing = {
      {"jobs", {listing_job("a", "running", 1), listing_job("b", "exited", 2), listing_job("c", "failed", 3)}}};
  listing["jobs"][2]["provider_name"] = "other";
  auto f = parse_ps_filters({"state=running", "status=exited"});
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(listing_ids(ps_rows(listing, *f)), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(f->wants_ended());
  auto g = parse_ps_filters({"state=failed", "provider=studio"});
  ASSERT_TRUE(g);
  EXPECT_TRUE(listing_ids(ps_rows(listing, *g)).empty());
  auto h = parse_ps_filters({"provider=abcd", "image=img:1", "state=running"});
  ASSERT_TRUE(h);
  EXPECT_EQ(listing_ids(ps_rows(listing, *h)), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(h->wants_ended());
}

TEST(PsFilter, AWaitingJobIsPendingAndItsOldNameQueuedIsTakenToo) {
  json listing = {{"jobs", {listing_job("a", "pending", 1), listing_job("b", "running", 2)}}};
  for (const char* given : {"state=pending", "state=queued"}) {
    auto f = parse_ps_filters({given});
    ASSERT_TRUE(f) << given << ": " << f.error().message();
    EXPECT_EQ(listing_ids(ps_rows(listing, *f)), (std::vector<std::string>{"a"})) << given;
    EXPECT_FALSE(f->wants_ended());
  }
}

TEST(PsFilter, NameMatchesAPartOfTheNameAsDockersDoes) {
  json listing = {
      {"jobs", {listing_job("a", "running", 1), listing_job("b", "running", 2), listing_job("c", "running", 3)}}};
  listing["jobs"][0]["name"] = "train-small";
  listing["jobs"][1]["name"] = "eval";
  auto f = parse_ps_filters({"name=train"});
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(listing_ids(ps_rows(listing, *f)), (std::vector<std::string>{"a"}));
  auto g = parse_ps_filters({"name=a"});  // "train-small" and "eval"; c has no name
  ASSERT_TRUE(g);
  EXPECT_EQ(listing_ids(ps_rows(listing, *g)), (std::vector<std::string>{"b", "a"}));
}

TEST(PsFilter, RefusesWhatItCannotFilterOnAndSaysWhatItCan) {
  for (const char* bad : {"state", "color=red", "state=", "state=done"}) {
    auto f = parse_ps_filters({bad});
    ASSERT_FALSE(f) << bad;
    EXPECT_TRUE(f.error().message().find("state") != std::string::npos) << f.error().message();
  }
}

TEST(PsFormat, IsTableOrJson) {
  EXPECT_EQ(parse_ps_format("").value(), PsFormat::kTable);
  EXPECT_EQ(parse_ps_format("json").value(), PsFormat::kJson);
  auto r = parse_ps_format("{{.ID}}");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("table or json"), std::string::npos);
}

TEST(AgoText, ReadsLikeDockers) {
  EXPECT_EQ(ago_text(0), "Less than a second ago");
  EXPECT_EQ(ago_text(1), "1 second ago");
  EXPECT_EQ(ago_text(42), "42 seconds ago");
  EXPECT_EQ(ago_text(90), "About a minute ago");
  EXPECT_EQ(ago_text(600), "10 minutes ago");
  EXPECT_EQ(ago_text(3600), "About an hour ago");
  EXPECT_EQ(ago_text(5 * 3600), "5 hours ago");
  EXPECT_EQ(ago_text(3 * 86400), "3 days ago");
}

TEST(DurationText, RunsUntilNowOrTheEnd) {
  json j = {{"state", "pending"}};
  EXPECT_EQ(duration_text(j, 100), "-");
  j = {{"state", "running"}, {"started_at", 100}};
  EXPECT_EQ(duration_text(j, 145), "45s");
  EXPECT_EQ(duration_text(j, 100 + 185), "3m05s");
  j = {{"state", "exited"}, {"started_at", 100}, {"finished_at", 100 + 2 * 3600 + 7 * 60}};
  EXPECT_EQ(duration_text(j, 1'000'000), "2h07m");
  j = {{"state", "exited"}, {"started_at", 100}};
  EXPECT_EQ(duration_text(j, 1'000'000), "-");  // ended, but not known when
}

TEST(GpuSeconds, AreTheLeasedGpusTimesTheRunTime) {
  json j = {{"state", "exited"}, {"started_at", 100}, {"finished_at", 400}, {"gpus", {"GPU-a", "GPU-b"}}};
  EXPECT_EQ(run_seconds(j, 1000), 300);
  EXPECT_EQ(gpu_seconds(j, 1000), 600);
  j = {{"state", "running"}, {"started_at", 100}, {"gpus", {"GPU-a"}}};
  EXPECT_EQ(gpu_seconds(j, 160), 60);  // so far
  j = {{"state", "exited"}, {"started_at", 100}, {"finished_at", 400}};
  EXPECT_EQ(gpu_seconds(j, 1000), 0);  // no GPU
  j = {{"state", "failed"}, {"started_at", 100}, {"gpus", {"GPU-a"}}};
  EXPECT_EQ(gpu_seconds(j, 1000), -1);  // ended, not known when
  j = {{"state", "pending"}, {"gpus", json::array()}};
  EXPECT_EQ(run_seconds(j, 1000), -1);
  // A share of one GPU: its part of the device's time, rounded up.
  j = {{"state", "exited"}, {"started_at", 100}, {"finished_at", 400}, {"gpus", json::array()},
       {"share", {{"gpu", "GPU-a"}, {"vram_bytes", 8ULL << 30}, {"permille", 334}}}};
  EXPECT_EQ(gpu_seconds(j, 1000), 101);  // 300 s x 0.334 = 100.2
  j["share"].erase("gpu");               // asked for, never placed
  EXPECT_EQ(gpu_seconds(j, 1000), 0);
  EXPECT_EQ(span_text(2 * 3600 + 7 * 60), "2h07m");
}

TEST(PsFilter, SinceKeepsJobsSubmittedThenOrLaterEndedOnesToo) {
  json listing = {
      {"jobs", {listing_job("a", "exited", 100), listing_job("b", "running", 200), listing_job("c", "failed", 300)}}};
  PsFilter f;
  f.since_s = 200;
  EXPECT_TRUE(f.wants_ended());
  EXPECT_EQ(listing_ids(ps_rows(listing, f)), (std::vector<std::string>{"c", "b"}));
  f.values["state"] = {"failed"};
  EXPECT_EQ(listing_ids(ps_rows(listing, f)), (std::vector<std::string>{"c"}));
}

TEST(InspectView, PutsStateExitCodeAndWhyFirst) {
  json failed = {{"updated_at", 5},      {"image", "img:1"},  {"message", "no such file"},
                 {"exit_code", nullptr}, {"state", "failed"}, {"reason", "start_failed"},
                 {"job_id", "j1"},       {"zzz", 1}};
  auto v = inspect_view(failed);
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"job_id", "state", "exit_code", "reason", "message", "image", "updated_at",
                                            "zzz"}));
  json ok = {{"state", "exited"}, {"exit_code", 0}, {"reason", "exited"}, {"job_id", "j2"}, {"image", "i"}};
  keys.clear();
  auto w = inspect_view(ok);
  for (const auto& [k, _] : w.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"job_id", "state", "exit_code", "image", "reason"}));
}

}  // namespace
}  // namespace yonder::cli
