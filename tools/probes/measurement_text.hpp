// The measurement folders' text (docs/datapaths.md §8.1, tests/data/tensorcore_corners/README.md): one case a
// line, operands as hex words, outputs as 32 binary digits. One home for the probes that read the case files
// (blockscale_probe.cu, tcgen05_probe.cu, mfma_probe.hip) and the generators that write them
// (blockscale_cases.cpp, mxf8f6f4_cases.cpp). Host code only, no fp4sim headers: the probes build with nvcc or
// hipcc alone.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace probe_text {

// A probe's one-line refusal (bad folder, failed layout check): the owner reruns after fixing it.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(2);
}

inline std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path + " (a case file; the vendored folders hold them as .txt.gz: gunzip first)");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::vector<std::uint32_t> hex_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::uint32_t> out;
  for (std::string t; in >> t;) out.push_back(static_cast<std::uint32_t>(std::stoul(t, nullptr, 16)));
  return out;
}

inline std::string hex(std::uint32_t word, int digits) {
  char s[16];
  std::snprintf(s, sizeof s, "%0*x", digits, static_cast<unsigned>(word));
  return s;
}

inline std::string bits(std::uint32_t word) {
  std::string s;
  for (int i = 31; i >= 0; --i) s += static_cast<char>('0' + ((word >> i) & 1));
  return s;
}

// A measured folder: the case files named in `files` copied from `in`, beside d.txt with the instruction's
// outputs, one case a line (what `fp4sim datapath identify` reads).
inline void write_measured(const std::string& in, const std::string& out, const std::vector<std::string>& files,
                           const std::vector<std::uint32_t>& d) {
  for (const std::string& f : files) {
    std::ifstream src(in + "/" + f + ".txt", std::ios::binary);
    std::ofstream dst(out + "/" + f + ".txt", std::ios::binary);
    dst << src.rdbuf();
  }
  std::ofstream dout(out + "/d.txt");
  for (std::uint32_t w : d) dout << bits(w) << '\n';
}

inline float as_float(std::uint32_t word) {
  float v;
  std::memcpy(&v, &word, 4);
  return v;
}

}  // namespace probe_text
