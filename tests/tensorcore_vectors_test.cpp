// Real-hardware MMA vectors (tests/data/tensorcore_vectors/README.md: Khattak–Mikaitis, H200/H100/B200,
// 5000 dot products per file) through the golden T-FDPA rows. No tolerance: every line must match bit
// for bit. The files are vendored in the repository; a missing or unreadable file fails the test.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <zlib.h>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"

namespace fp4sim {
namespace {

namespace fs = std::filesystem;

fs::path vectors_dir() { return fs::path(FP4SIM_SOURCE_DIR) / "tests" / "data" / "tensorcore_vectors"; }

// The lines of a .txt.gz (zlib), 5000 per vector file; an unreadable file fails the calling test.
std::vector<std::string> read_gz_lines(const fs::path& path) {
  std::vector<std::string> lines;
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) {
    ADD_FAILURE() << "cannot open vector file " << path;
    return lines;
  }
  char buffer[1 << 16];
  std::string current;
  while (gzgets(file, buffer, sizeof buffer)) {
    current += buffer;
    if (!current.empty() && current.back() == '\n') {
      current.pop_back();
      lines.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) lines.push_back(std::move(current));
  int status = Z_OK;
  const char* message = gzerror(file, &status);
  if (status != Z_OK && status != Z_STREAM_END) ADD_FAILURE() << "reading " << path << ": " << message;
  gzclose(file);
  return lines;
}

std::vector<std::uint32_t> parse_hex_words(const std::string& line) {
  std::vector<std::uint32_t> words;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    if (pos >= line.size()) break;
    std::size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    words.push_back(static_cast<std::uint32_t>(std::stoul(line.substr(pos, end - pos), nullptr, 16)));
    pos = end;
  }
  return words;
}

std::uint32_t parse_binary_word(const std::string& line) {
  std::uint32_t v = 0;
  int digits = 0;
  for (char ch : line) {
    if (ch == '0' || ch == '1') {
      v = (v << 1) | static_cast<std::uint32_t>(ch - '0');
      ++digits;
    }
  }
  EXPECT_EQ(digits, 32) << "line '" << line << "'";
  return v;
}

enum class CInput { file, file_to_fp16, zero };

struct VectorCase {
  const char* gpu;
  const char* folder;  // bf16 fp16 tf32 E4M3 E5M2
  const char* input;   // fp4sim input format name
  const char* d_suffix;  // fp32 or fp16
  const char* datapath;
  CInput c;
};

std::string case_name(const ::testing::TestParamInfo<VectorCase>& info) {
  std::string s = std::string(info.param.gpu) + "_" + info.param.folder + "_to_" + info.param.d_suffix + "_" +
                  info.param.datapath;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

class TensorcoreVectors : public ::testing::TestWithParam<VectorCase> {};

TEST_P(TensorcoreVectors, EveryLineMatchesBitForBit) {
  const VectorCase& vc = GetParam();
  const fs::path dir = vectors_dir() / vc.gpu / vc.folder;
  const std::string g = vc.gpu;
  const fs::path a_path = dir / ("a_" + g + "_" + vc.folder + ".txt.gz");
  const fs::path b_path = dir / ("b_" + g + "_" + vc.folder + ".txt.gz");
  const fs::path c_path = dir / ("c_" + g + "_fp32.txt.gz");
  const fs::path d_path = dir / ("d_" + g + "_" + vc.d_suffix + ".txt.gz");
  for (const auto& p : {a_path, b_path, c_path, d_path}) {
    ASSERT_TRUE(fs::exists(p)) << "vector file missing: " << p;
  }
  const auto a_lines = read_gz_lines(a_path);
  const auto b_lines = read_gz_lines(b_path);
  const auto c_lines = read_gz_lines(c_path);
  const auto d_lines = read_gz_lines(d_path);
  ASSERT_EQ(a_lines.size(), 5000u);
  ASSERT_EQ(b_lines.size(), 5000u);
  ASSERT_EQ(c_lines.size(), 5000u);
  ASSERT_EQ(d_lines.size(), 5000u);

  const Datapath* dp = find_datapath(vc.datapath);
  ASSERT_NE(dp, nullptr);
  const auto spec = find_input(*dp, vc.input);
  ASSERT_TRUE(spec.has_value());
  const Format input = *input_format(vc.input);

  int matches = 0, reported = 0;
  for (std::size_t line = 0; line < 5000; ++line) {
    const auto a_bits = parse_hex_words(a_lines[line]);
    const auto b_bits = parse_hex_words(b_lines[line]);
    ASSERT_EQ(a_bits.size(), b_bits.size());
    // Element values are FP32 patterns exactly representable in the input format (README); convert
    // them to the format's codes, which also proves that claim, and pad K with zeros to a whole
    // instruction (tf32 lines hold k = 0..3 of a k8 instruction; the rest of the tile is zero).
    std::vector<double> a_vals, b_vals;
    for (auto w : a_bits) a_vals.push_back(static_cast<double>(std::bit_cast<float>(w)));
    for (auto w : b_bits) b_vals.push_back(static_cast<double>(std::bit_cast<float>(w)));
    const std::size_t k = static_cast<std::size_t>(spec->instruction_k);
    ASSERT_LE(a_vals.size(), k);
    a_vals.resize(k, 0.0);
    b_vals.resize(k, 0.0);
    const InputCodes a_codes = input_codes(input, a_vals);
    const InputCodes b_codes = input_codes(input, b_vals);
    ASSERT_FALSE(a_codes.first_unrepresentable.has_value()) << "line " << line;
    ASSERT_FALSE(b_codes.first_unrepresentable.has_value()) << "line " << line;

    std::uint32_t c = parse_binary_word(c_lines[line]);
    if (vc.c == CInput::zero) c = 0;
    if (vc.c == CInput::file_to_fp16) {
      // __float2half(c): RNE to fp16, then the f16 accumulator holds it (widened here to FP32 bits).
      const Encoded h = encode(formats::fp16, std::bit_cast<float>(c), EncodeOptions{Rounding::rne, false});
      c = std::bit_cast<std::uint32_t>(decode_to_float(formats::fp16, h.code));
    }
    const std::uint32_t expected = parse_binary_word(d_lines[line]);
    const std::uint32_t got = tfdpa_dot(*dp, input, a_codes.codes, b_codes.codes, c);
    if (got == expected) {
      ++matches;
    } else if (reported++ < 5) {
      ADD_FAILURE() << vc.gpu << "/" << vc.folder << " line " << line << ": expected 0x" << std::hex << expected
                    << " got 0x" << got << std::dec;
    }
  }
  std::printf("  %s/%s -> %s with %s: %d/5000\n", vc.gpu, vc.folder, vc.d_suffix, vc.datapath, matches);
  EXPECT_EQ(matches, 5000);
}

// The FP8 fp32 files on H100/H200 are WGMMA with C = 0 (README); the f16-accumulator FP8 files and
// the mma.sync FP8 files are emulated sequences, not the tensor-core datapath, and are not listed.
const VectorCase kCases[] = {
    {"H200", "bf16", "bf16", "fp32", "sm90-bf16", CInput::file},
    {"H200", "fp16", "fp16", "fp32", "sm90-bf16", CInput::file},
    {"H200", "fp16", "fp16", "fp16", "sm90-f16acc", CInput::file_to_fp16},
    {"H200", "tf32", "tf32", "fp32", "sm90-tf32", CInput::file},
    {"H200", "E4M3", "e4m3", "fp32", "sm90-fp8", CInput::zero},
    {"H200", "E5M2", "e5m2", "fp32", "sm90-fp8", CInput::zero},
    {"H100", "bf16", "bf16", "fp32", "sm90-bf16", CInput::file},
    {"H100", "fp16", "fp16", "fp32", "sm90-bf16", CInput::file},
    {"H100", "fp16", "fp16", "fp16", "sm90-f16acc", CInput::file_to_fp16},
    {"H100", "tf32", "tf32", "fp32", "sm90-tf32", CInput::file},
    {"H100", "E4M3", "e4m3", "fp32", "sm90-fp8", CInput::zero},
    {"H100", "E5M2", "e5m2", "fp32", "sm90-fp8", CInput::zero},
    {"B200", "bf16", "bf16", "fp32", "sm100-f16", CInput::file},
    {"B200", "fp16", "fp16", "fp32", "sm100-f16", CInput::file},
    {"B200", "fp16", "fp16", "fp16", "sm100-f16acc", CInput::file_to_fp16},
    {"B200", "tf32", "tf32", "fp32", "sm100-tf32", CInput::file},
};

INSTANTIATE_TEST_SUITE_P(Hardware, TensorcoreVectors, ::testing::ValuesIn(kCases), case_name);

// Sharpness (docs/datapaths.md §5): neighbouring parameter choices must fail on the same
// data, or the vectors would not be pinning F, G, truncation and C handling.
TEST(TensorcoreVectorsSharpness, NeighbouringModelsMiss) {
  const fs::path dir = vectors_dir() / "H200" / "bf16";
  ASSERT_TRUE(fs::exists(dir / "a_H200_bf16.txt.gz")) << "vector files missing under " << dir;
  const auto a_lines = read_gz_lines(dir / "a_H200_bf16.txt.gz");
  const auto b_lines = read_gz_lines(dir / "b_H200_bf16.txt.gz");
  const auto c_lines = read_gz_lines(dir / "c_H200_fp32.txt.gz");
  const auto d_lines = read_gz_lines(dir / "d_H200_fp32.txt.gz");
  ASSERT_EQ(d_lines.size(), 5000u);
  const Datapath* base = find_datapath("sm90-bf16");
  ASSERT_NE(base, nullptr);
  auto count = [&](const Datapath& dp) {
    int matches = 0;
    for (std::size_t line = 0; line < 5000; ++line) {
      std::vector<std::uint32_t> a, b;
      for (auto w : parse_hex_words(a_lines[line])) a.push_back(w >> 16);
      for (auto w : parse_hex_words(b_lines[line])) b.push_back(w >> 16);
      matches += tfdpa_dot(dp, formats::bf16, a, b, parse_binary_word(c_lines[line])) == parse_binary_word(d_lines[line]);
    }
    return matches;
  };
  Datapath f24 = *base;
  f24.fused.frac_bits = 24;
  Datapath f26 = *base;
  f26.fused.frac_bits = 26;
  Datapath g8 = *base;
  g8.fused.group = 8;
  Datapath late_c = *base;
  late_c.fused.c_in_alignment = false;
  Datapath normalised = *base;
  normalised.fused.product_unnormalized = false;
  Datapath rne = *base;
  rne.fused.out_rounding = OutputRounding::rne;
  EXPECT_EQ(count(*base), 5000);
  // The README's counts for these alternatives on the same file.
  EXPECT_EQ(count(f24), 4475);
  EXPECT_EQ(count(f26), 4830);
  EXPECT_EQ(count(g8), 4066);
  EXPECT_EQ(count(late_c), 4805);
  EXPECT_EQ(count(normalised), 4839);
  EXPECT_EQ(count(rne), 3295);
}

}  // namespace
}  // namespace fp4sim
