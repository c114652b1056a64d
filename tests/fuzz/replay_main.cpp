// The fuzz targets without libFuzzer (any compiler; ctest runs it in every build, the sanitizer
// ones included): the target's seeds, every file of the corpus folders given, and a fixed number
// of deterministic mutations of them (bit flips, truncations, insertions, splices), so each CI
// run replays what libFuzzer found before and probes the neighbourhood of every valid message.
//   fuzz_replay_NAME [--mutations N] [--write-seeds DIR] [CORPUS_DIR_OR_FILE...]
// --write-seeds writes the target's seeds into DIR (the committed seed corpus) and exits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string mutate(const std::string& in, const std::vector<std::string>& pool,
                   std::mt19937_64& rng) {
  std::string s = in;
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  switch (rng() % 6) {
    case 0:  // flip a bit
      if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // truncate
      s.resize(pick(s.size() + 1));
      break;
    case 2:  // insert random bytes
      s.insert(pick(s.size() + 1), std::string(1 + pick(16), static_cast<char>(rng())));
      break;
    case 3:  // overwrite a word with an extreme value
      if (s.size() >= 8) {
        const std::size_t at = pick(s.size() - 7);
        const std::uint64_t v = rng() % 2 == 0 ? ~0ULL : 0x8000000000000000ULL;
        std::memcpy(s.data() + at, &v, 8);
      }
      break;
    case 4:  // splice with another input (the first byte, the selector, kept)
      if (!pool.empty()) {
        const std::string& o = pool[pick(pool.size())];
        s = s.substr(0, pick(s.size() + 1)) + o.substr(std::min(o.size(), pick(o.size() + 1)));
      }
      break;
    default:  // a random byte
      if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
      break;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mutations = 20000;
  std::vector<std::string> inputs = orbite::fuzz::seeds();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--write-seeds" && i + 1 < argc) {
      const std::filesystem::path dir = argv[++i];
      std::filesystem::create_directories(dir);
      int n = 0;
      for (const std::string& s : inputs) {
        std::ofstream(dir / ("seed-" + std::to_string(n++)), std::ios::binary) << s;
      }
      std::printf("%d seeds written to %s\n", n, dir.c_str());
      return 0;
    } else if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) inputs.push_back(read_file(e.path()));
      }
    } else if (std::filesystem::is_regular_file(arg)) {
      inputs.push_back(read_file(arg));
    } else {
      std::fprintf(stderr, "fuzz replay: '%s' is not a file, a folder or an option\n", argv[i]);
      return 2;
    }
  }
  const std::vector<std::string> own = orbite::fuzz::seeds();
  for (std::size_t i = 0; i < own.size(); ++i) {
    if (!orbite::fuzz::accepts(reinterpret_cast<const std::uint8_t*>(own[i].data()),
                               own[i].size())) {
      std::fprintf(stderr, "fuzz replay: seed %zu is refused by its own decoder\n", i);
      return 1;
    }
  }
  for (const std::string& s : inputs) run(s);
  std::mt19937_64 rng(0x0B17E5EED);  // fixed: a failure replays exactly
  for (std::size_t i = 0; i < mutations; ++i) {
    run(mutate(inputs[i % inputs.size()], inputs, rng));
  }
  std::printf("fuzz replay: %zu inputs, %zu mutations, no finding\n", inputs.size(), mutations);
  return 0;
}
