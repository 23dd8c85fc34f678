#include "relay/run.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace yonder::relay {
namespace asio = boost::asio;

namespace {

int fail(const Error& e) {
  spdlog::error("yonder-relay cannot start: {}", e.to_string());
  return 1;
}

Result<std::optional<std::string>> passphrase_from_env() {
  if (const char* p = std::getenv("YONDER_PASSPHRASE")) return std::optional<std::string>(p);
  if (const char* file = std::getenv("YONDER_PASSPHRASE_FILE")) {
    std::ifstream in(file);
    if (!in) return make_error(ErrorCode::kNotFound, std::string("cannot read YONDER_PASSPHRASE_FILE ") + file);
    std::string line;
    std::getline(in, line);
    return std::optional<std::string>(line);
  }
  return std::optional<std::string>();
}

// The relay's identity: the one thing it keeps across restarts, so nodes
// that pinned its key keep trusting it. Made on first start.
Result<Identity> load_or_create_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    auto id = Identity::generate();
    if (!id) return std::move(id).error();
    auto text = encode_key_file(*id, std::nullopt);
    if (!text) return std::move(text).error();
    YONDER_TRY(write_key_file(path, *text));
    spdlog::info("created a new relay key in {}", path);
    return id;
  }
  auto text = read_key_file(path);
  if (!text) return Error(text.error()).with_context(path);
  auto file = parse_key_file(*text);
  if (!file) return Error(file.error()).with_context(path);
  std::optional<std::string> passphrase;
  if (file->encrypted) {
    auto p = passphrase_from_env();
    if (!p) return std::move(p).error();
    if (!*p) {
      return make_error(ErrorCode::kPermissionDenied,
                        path + " is encrypted: set YONDER_PASSPHRASE or YONDER_PASSPHRASE_FILE for the relay");
    }
    passphrase = *p;
  }
  return open_key_file(*file, passphrase);
}

std::string endpoint_text(const asio::ip::tcp::endpoint& ep) {
  return NetAddress{canonical_ip(ep.address().to_string()).value_or(ep.address().to_string()), ep.port()}.to_string();
}

// Each connection is a descriptor, and each joined pipe end two more (its
// direction's kernel pipe for splice): raise the soft limit to the hard one
// and say so if that is still short of what the limits allow.
void raise_descriptor_limit(size_t max_connections) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  rlim_t wanted = static_cast<rlim_t>(max_connections) * 3 + 64;
  if (lim.rlim_cur < wanted) {
    spdlog::warn(
        "the open file limit ({}) is below what --max-connections {} may need ({}); raise it (ulimit -n) "
        "or lower --max-connections",
        static_cast<unsigned long long>(lim.rlim_cur), max_connections, static_cast<unsigned long long>(wanted));
  }
}

}  // namespace

int run_relay(const RelayOptions& options) {
  ::umask(077);
  auto logger =
      std::make_shared<spdlog::logger>("yonder-relay", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(spdlog::level::from_str(options.log_level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);

  if (options.key_file.empty()) return fail(make_error(ErrorCode::kInvalidArgument, "--key-file is required"));
  auto identity = load_or_create_key(options.key_file);
  if (!identity) return fail(Error(identity.error()).with_context("relay key"));

  raise_descriptor_limit(options.config.max_connections);
  asio::io_context io;
  RelayServer server(io, *identity, options.config);
  if (auto st = server.listen(options.listen); !st) return fail(st.error());
  if (options.metrics != "off") {
    if (auto st = server.listen_metrics(options.metrics); !st) return fail(st.error());
  }
  int dump_fd = -1;
  if (!options.dump_file.empty()) {
    dump_fd = ::open(options.dump_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (dump_fd < 0) {
      return fail(make_error(ErrorCode::kUnavailable, "cannot open the dump file " + options.dump_file));
    }
    spdlog::warn("debugging: appending every relayed pipe byte to {} (ciphertext of the peers' sessions)",
                 options.dump_file);
    server.set_tap([dump_fd](const PublicKeyBytes&, ByteView bytes) {
      [[maybe_unused]] auto n = ::write(dump_fd, bytes.data(), bytes.size());
    });
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}, stopping", sig);
    server.stop();  // the loop ends once the goodbyes are out
  });

  // What a script needs, on stdout: the key to pin and the bound ports.
  std::printf("node %s\nlisten %s\n", identity->node_id().to_string().c_str(),
              endpoint_text(server.local_endpoint()).c_str());
  if (auto stun = server.stun_endpoint()) {
    std::printf("stun %s\n", endpoint_text(asio::ip::tcp::endpoint(stun->address(), stun->port())).c_str());
  }
  if (options.metrics != "off") std::printf("metrics %s\n", endpoint_text(server.metrics_endpoint()).c_str());
  std::fflush(stdout);
  spdlog::info("yonder-relay ready: node {}, nodes on {}, metrics {}", identity->node_id().to_string(),
               endpoint_text(server.local_endpoint()),
               options.metrics == "off" ? "off" : endpoint_text(server.metrics_endpoint()));
  if (options.ready_fd >= 0) {
    [[maybe_unused]] auto n = ::write(options.ready_fd, "ready\n", 6);
    ::close(options.ready_fd);
  }
  io.run();
  if (dump_fd >= 0) ::close(dump_fd);
  spdlog::info("stopped");
  return 0;
}

}  // namespace yonder::relay
