#include "exec/docker/docker_json.h"

#include <gtest/gtest.h>

namespace yonder::exec::docker {
namespace {

TEST(DockerJson, InspectReadsStateOomAndLabels) {
  auto info = parse_inspect(R"({"Id":"abc","State":{"Status":"exited","Running":false,"Pid":0,"ExitCode":137,
    "OOMKilled":true,"Error":"","StartedAt":"2026-11-30T01:12:57.1Z","FinishedAt":"0001-01-01T00:00:00Z"},
    "Config":{"Labels":{"yonder.job":"j1","yonder.owner":"n"}},"Unknown":[1,2]})");
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->exit_code, 137);
  EXPECT_TRUE(info->oom_killed);
  EXPECT_EQ(info->status, "exited");
  EXPECT_EQ(info->labels.at("yonder.job"), "j1");
  EXPECT_EQ(info->started_at_ns, 1796001177100000000LL);
  EXPECT_EQ(info->finished_at_ns, 0);
  EXPECT_FALSE(info->tty);
  auto tty = parse_inspect(R"({"Id":"abc","State":{"Status":"running","Running":true},"Config":{"Tty":true}})");
  ASSERT_TRUE(tty.ok()) << tty.error().to_string();
  EXPECT_TRUE(tty->tty);
}

TEST(DockerJson, WrongTypesAndShapesAreErrorsNotCrashes) {
  for (const char* bad : {"", "[]", "null", "{\"State\":1}", R"({"State":{"ExitCode":"3"}})",
                          R"({"State":{"Running":1}})", R"({"State":{},"Config":{"Labels":{"a":1}}})", "{\"State\":{}"}) {
    EXPECT_FALSE(parse_inspect(bad).ok()) << bad;
  }
  EXPECT_FALSE(parse_wait("{}").ok());
  EXPECT_FALSE(parse_create_response(R"({"Id":""})").ok());
  EXPECT_FALSE(parse_container_list("{}").ok());
  EXPECT_FALSE(parse_container_list("[1]").ok());
  EXPECT_FALSE(parse_inspect(std::string(kMaxJsonBody + 1, ' ')).ok());
}

TEST(DockerJson, WaitCreateExecAndStats) {
  auto w = parse_wait(R"({"Error":{"Message":"boom"},"StatusCode":3})");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->status_code, 3);
  EXPECT_EQ(w->error, "boom");
  EXPECT_EQ(parse_wait(R"({"Error":null,"StatusCode":0})")->status_code, 0);
  EXPECT_EQ(*parse_create_response(R"({"Id":"0e1e","Warnings":[]})"), "0e1e");
  EXPECT_EQ(*parse_exec_create(R"({"Id":"e1"})"), "e1");
  auto e = parse_exec_inspect(R"({"Running":false,"ExitCode":4})");
  EXPECT_EQ(e->exit_code, 4);
  auto s = parse_stats(R"({"memory_stats":{"usage":1048576},"cpu_stats":{"cpu_usage":{"total_usage":5}},"pids_stats":{"current":3}})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->memory_bytes, 1048576u);
  EXPECT_EQ(s->pids, 3u);
}

TEST(DockerJson, VersionTellsPodmanApart) {
  auto docker = parse_version(R"({"Platform":{"Name":""},"Components":[{"Name":"Engine"}],"Version":"20.10.24","ApiVersion":"1.41"})");
  ASSERT_TRUE(docker.ok());
  EXPECT_FALSE(docker->podman);
  auto podman = parse_version(R"({"Platform":{"Name":"linux/amd64/debian-12"},"Components":[{"Name":"Podman Engine","Version":"4.3.1"}],"Version":"4.3.1","ApiVersion":"1.41"})");
  ASSERT_TRUE(podman.ok());
  EXPECT_TRUE(podman->podman);
}

TEST(DockerJson, InfoListsRuntimes) {
  auto info = parse_info(R"({"Runtimes":{"runc":{"path":"runc"},"nvidia":{"path":"nvidia-container-runtime"}},"DefaultRuntime":"runc","CgroupVersion":"2"})");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->runtimes, (std::vector<std::string>{"nvidia", "runc"}));
  EXPECT_EQ(info->cgroup_version, 2);
}

TEST(DockerJson, ErrorMessagesAndPullProgress) {
  EXPECT_EQ(parse_error_message(R"({"message":"No such container: x"})"), "No such container: x");
  EXPECT_EQ(parse_error_message("plain\x01text"), "plain?text");
  EXPECT_EQ(parse_pull_progress_error(R"({"status":"Downloading"})"), "");
  EXPECT_EQ(parse_pull_progress_error(R"({"errorDetail":{"message":"denied"},"error":"denied!"})"), "denied!");
  EXPECT_EQ(parse_pull_progress_error(R"({"errorDetail":{"message":"denied"}})"), "denied");
}

TEST(DockerJson, ImageInspectDigests) {
  auto i = parse_image_inspect(R"({"Id":"sha256:aa","RepoDigests":["python@sha256:bb"]})");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->id, "sha256:aa");
  EXPECT_EQ(i->repo_digests.at(0), "python@sha256:bb");
}

}  // namespace
}  // namespace yonder::exec::docker
