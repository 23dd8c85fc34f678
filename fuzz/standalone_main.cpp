// A stand-in for libFuzzer's driver, so fuzz targets build with GCC and run in
// the normal test suite: it replays every file of the given corpus folders,
// then feeds `-runs=N` mutations of them (bit flips, byte changes, cuts,
// splices, duplications) from a fixed seed, so a failure is reproducible.
// Long, coverage-guided runs use real libFuzzer (scripts/fuzz.sh).
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Input = std::vector<uint8_t>;

Input read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Input(std::istreambuf_iterator<char>(in), {});
}

// The input being run, for the crash handler: it writes it to
// ./crash-input (async-signal-safe calls only), so a crash found by the
// seeded mutations can be replayed: `TARGET crash-input`.
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;

void save_crash_input(int sig) {
  int fd = ::open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t done = 0;
    while (done < g_current_size) {
      ssize_t n = ::write(fd, g_current + done, g_current_size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    static const char kMsg[] = "fuzz: crashed; the input is in ./crash-input\n";
    (void)!::write(2, kMsg, sizeof kMsg - 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void run_one(const Input& in) {
  // Copy into an exact-size heap buffer so ASan catches reads past the end.
  auto* buf = static_cast<uint8_t*>(std::malloc(in.size() + 1));
  if (!in.empty()) std::memcpy(buf, in.data(), in.size());
  g_current = buf;
  g_current_size = in.size();
  LLVMFuzzerTestOneInput(buf, in.size());
  g_current = nullptr;
  g_current_size = 0;
  std::free(buf);
}

Input mutate(const std::vector<Input>& corpus, std::mt19937_64& rng) {
  Input x = corpus.empty() ? Input{} : corpus[rng() % corpus.size()];
  int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:
        if (!x.empty()) x[rng() % x.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!x.empty()) x[rng() % x.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:
        x.insert(x.begin() + static_cast<long>(x.empty() ? 0 : rng() % (x.size() + 1)), static_cast<uint8_t>(rng()));
        break;
      case 3:
        if (!x.empty()) x.erase(x.begin() + static_cast<long>(rng() % x.size()));
        break;
      case 4:
        if (!x.empty()) x.resize(rng() % x.size());
        break;
      case 5:
        if (!corpus.empty()) {
          const Input& other = corpus[rng() % corpus.size()];
          size_t at = x.empty() ? 0 : rng() % x.size();
          size_t from = other.empty() ? 0 : rng() % other.size();
          x.resize(at);
          x.insert(x.end(), other.begin() + static_cast<long>(from), other.end());
        }
        break;
      case 6:
        if (!x.empty() && x.size() < 65536) {
          size_t a = rng() % x.size();
          size_t len = 1 + rng() % (x.size() - a);
          Input chunk(x.begin() + static_cast<long>(a), x.begin() + static_cast<long>(a + len));
          x.insert(x.begin() + static_cast<long>(a), chunk.begin(), chunk.end());
        }
        break;
    }
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  for (int sig : {SIGILL, SIGSEGV, SIGABRT, SIGFPE, SIGBUS}) ::signal(sig, save_crash_input);
  long runs = 1000;
  std::vector<Input> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::atol(arg.c_str() + 6);
      continue;
    }
    std::filesystem::path p(arg);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
      }
    } else {
      corpus.push_back(read_file(p));
    }
  }
  for (const auto& in : corpus) run_one(in);
  std::mt19937_64 rng(0x59'4f'4e'44'45'52ULL);
  for (long i = 0; i < runs; ++i) run_one(mutate(corpus, rng));
  std::printf("fuzz: %zu corpus inputs, %ld mutations, no crash\n", corpus.size(), runs);
  return 0;
}
