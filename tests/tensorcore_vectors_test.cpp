// Real-hardware MMA vectors (tests/data/tensorcore_vectors/README.md: Khattak–Mikaitis, H200/H100/B200,
// 5000 dot products per file; tests/data/tensorcore_corners/README.md: fp4sim's own H200 corner cases)
// through the golden T-FDPA rows. No tolerance: every line must match bit for bit. The files are vendored
// in the repository; a missing or unreadable file fails the test.
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
fs::path corners_dir() { return fs::path(FP4SIM_SOURCE_DIR) / "tests" / "data" / "tensorcore_corners" / "H200"; }

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
  const Format input = spec->format;

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

// ---------------------------------------------------------------------------------------------------
// fp4sim's H200 corner cases (tests/data/tensorcore_corners): one folder per instruction, A and B formats
// given separately (wgmma e4m3 x e5m2), tf32 tokens the raw registers (read as the rows' fp32 input).

struct CornerSet {
  const char* folder;
  const char* datapath;
  const char* a_input;
  const char* b_input;
  std::size_t lines;
};

struct CornerLines {
  std::vector<std::vector<std::uint32_t>> a, b;  // codes of the inputs
  std::vector<std::uint32_t> c, d;
};

// The lines of one corner folder; element tokens go through input_codes from their exact double
// (widen_binary32, as `fp4sim mma` reads a float32 .npy), which also proves them exact in the format.
CornerLines read_corners(const CornerSet& set, const Format& a_format, const Format& b_format) {
  CornerLines out;
  const fs::path dir = corners_dir() / set.folder;
  const auto a_lines = read_gz_lines(dir / "a.txt.gz");
  const auto b_lines = read_gz_lines(dir / "b.txt.gz");
  const auto c_lines = read_gz_lines(dir / "c.txt.gz");
  const auto d_lines = read_gz_lines(dir / "d.txt.gz");
  EXPECT_EQ(a_lines.size(), set.lines);
  if (a_lines.size() != set.lines || b_lines.size() != set.lines || c_lines.size() != set.lines ||
      d_lines.size() != set.lines) {
    ADD_FAILURE() << set.folder << ": expected " << set.lines << " lines in each of a, b, c, d";
    return out;
  }
  auto codes = [](const Format& f, const std::string& line) {
    std::vector<double> values;
    for (auto w : parse_hex_words(line)) values.push_back(widen_binary32(w));
    InputCodes ic = input_codes(f, values);
    EXPECT_FALSE(ic.first_unrepresentable.has_value()) << "'" << line << "'";
    return ic.codes;
  };
  for (std::size_t i = 0; i < set.lines; ++i) {
    out.a.push_back(codes(a_format, a_lines[i]));
    out.b.push_back(codes(b_format, b_lines[i]));
    out.c.push_back(parse_binary_word(c_lines[i]));
    out.d.push_back(parse_binary_word(d_lines[i]));
  }
  return out;
}

Format input_format(const Datapath& dp, const char* name) {
  const auto spec = find_input(dp, name);
  EXPECT_TRUE(spec.has_value()) << dp.name << " does not take " << name;
  return spec ? spec->format : formats::fp32;
}

int corner_matches(const CornerLines& x, const Datapath& dp, const Format& a_format, const Format& b_format,
                   int report = 0) {
  int matches = 0, reported = 0;
  for (std::size_t i = 0; i < x.d.size(); ++i) {
    const std::uint32_t got = tfdpa_dot(dp, a_format, x.a[i], b_format, x.b[i], x.c[i]);
    if (got == x.d[i]) {
      ++matches;
    } else if (reported++ < report) {
      ADD_FAILURE() << dp.name << " line " << i << ": measured 0x" << std::hex << x.d[i] << " got 0x" << got << std::dec;
    }
  }
  return matches;
}

std::string corner_name(const ::testing::TestParamInfo<CornerSet>& info) { return info.param.folder; }

class TensorcoreCorners : public ::testing::TestWithParam<CornerSet> {};

TEST_P(TensorcoreCorners, EveryLineMatchesBitForBit) {
  const CornerSet& set = GetParam();
  const Datapath* dp = find_datapath(set.datapath);
  ASSERT_NE(dp, nullptr);
  const Format fa = input_format(*dp, set.a_input), fb = input_format(*dp, set.b_input);
  const CornerLines x = read_corners(set, fa, fb);
  ASSERT_EQ(x.d.size(), set.lines);
  const int matches = corner_matches(x, *dp, fa, fb, 5);
  std::printf("  H200 %s with %s: %d/%zu\n", set.folder, set.datapath, matches, set.lines);
  EXPECT_EQ(static_cast<std::size_t>(matches), set.lines);
}

const CornerSet kCorners[] = {
    {"mma_sync_bf16_f32", "sm90-bf16", "bf16", "bf16", 2502},
    {"mma_sync_f16_f32", "sm90-bf16", "fp16", "fp16", 1001},
    {"mma_sync_f16_f16", "sm90-f16acc", "fp16", "fp16", 4904},
    {"mma_sync_tf32_f32", "sm90-tf32", "fp32", "fp32", 3182},
    {"wgmma_bf16_f32", "sm90-bf16", "bf16", "bf16", 2502},
    {"wgmma_f16_f32", "sm90-bf16", "fp16", "fp16", 1001},
    {"wgmma_f16_f16", "sm90-f16acc", "fp16", "fp16", 4904},
    {"wgmma_tf32_f32", "sm90-tf32", "fp32", "fp32", 3182},
    {"wgmma_e4m3_e4m3_f32", "sm90-fp8", "e4m3", "e4m3", 2397},
    {"wgmma_e4m3_e5m2_f32", "sm90-fp8", "e4m3", "e5m2", 2397},
    {"wgmma_e5m2_e4m3_f32", "sm90-fp8", "e5m2", "e4m3", 2397},
    {"wgmma_e5m2_e5m2_f32", "sm90-fp8", "e5m2", "e5m2", 2397},
    {"wgmma_e4m3_e4m3_f16", "sm90-fp8-f16acc", "e4m3", "e4m3", 5381},
    {"wgmma_e4m3_e5m2_f16", "sm90-fp8-f16acc", "e4m3", "e5m2", 5381},
    {"wgmma_e5m2_e5m2_f16", "sm90-fp8-f16acc", "e5m2", "e5m2", 5381},
    {"wgmma_e5m2_e4m3_f16", "sm90-fp8-f16acc", "e5m2", "e4m3", 5381},
};

INSTANTIATE_TEST_SUITE_P(H200, TensorcoreCorners, ::testing::ValuesIn(kCorners), corner_name);

// Each rule the corner files decided (docs/datapaths.md §7.4) must be needed: the row with the one
// field flipped back misses exactly this many lines.
TEST(TensorcoreCornersSharpness, EachDecidedRuleIsNeeded) {
  auto misses = [](const CornerSet& set, auto change) {
    Datapath dp = *find_datapath(set.datapath);
    const Format fa = input_format(dp, set.a_input), fb = input_format(dp, set.b_input);
    CornerLines x = read_corners(set, fa, fb);
    change(dp, x);
    return static_cast<int>(set.lines) - corner_matches(x, dp, fa, fb);
  };
  auto signed_zero = [](Datapath& dp, CornerLines&) { dp.fused.zero_result = ZeroResult::signed_underflow; };
  auto c_leading_bit = [](Datapath& dp, CornerLines&) { dp.fused.c_at_accumulator_emin = false; };
  // The old reader: every NaN canonicalised to 0x7FC00000 before the tf32 truncation.
  auto canonical_nan = [](Datapath&, CornerLines& x) {
    for (auto* v : {&x.a, &x.b})
      for (auto& line : *v)
        for (auto& w : line)
          if ((w & 0x7F800000u) == 0x7F800000u && (w & 0x7FFFFFu)) w = 0x7FC00000u;
  };
  const CornerSet& bf16 = kCorners[0];
  const CornerSet& f16acc = kCorners[2];
  const CornerSet& tf32 = kCorners[3];
  const CornerSet& fp8_f16 = kCorners[14];
  EXPECT_EQ(misses(bf16, signed_zero), 201);
  EXPECT_EQ(misses(f16acc, signed_zero), 206);
  EXPECT_EQ(misses(f16acc, c_leading_bit), 81);
  // The fp16 accumulator's E_max floor is -21 (Khattak–Mikaitis), not none (MMA-Sim) nor a neighbour.
  EXPECT_EQ(misses(f16acc, [](Datapath& dp, CornerLines&) { dp.fused.e_floor = kNoExponent; }), 157);
  EXPECT_EQ(misses(f16acc, [](Datapath& dp, CornerLines&) { dp.fused.e_floor = -22; }), 78);
  EXPECT_EQ(misses(f16acc, [](Datapath& dp, CornerLines&) { dp.fused.e_floor = -20; }), 63);
  EXPECT_EQ(misses(tf32, signed_zero), 185);
  EXPECT_EQ(misses(tf32, canonical_nan), 55);
  EXPECT_EQ(misses(tf32, [](Datapath& dp, CornerLines&) { dp.fused.tf32_truncate_inputs = false; }), 555);
  // sm90-fp8-f16acc: G = 32, F = 13 and RNE are each needed; so are the two Hopper rules.
  EXPECT_EQ(misses(fp8_f16, signed_zero), 165);
  EXPECT_EQ(misses(fp8_f16, c_leading_bit), 177);
  EXPECT_EQ(misses(fp8_f16, [](Datapath& dp, CornerLines&) { dp.fused.frac_bits = 12; }), 324);
  EXPECT_EQ(misses(fp8_f16, [](Datapath& dp, CornerLines&) { dp.fused.frac_bits = 14; }), 193);
  EXPECT_EQ(misses(fp8_f16, [](Datapath& dp, CornerLines&) { dp.fused.frac_bits = 25; }), 1084);
  EXPECT_EQ(misses(fp8_f16, [](Datapath& dp, CornerLines&) { dp.fused.group = 16; }), 483);
  EXPECT_EQ(misses(fp8_f16, [](Datapath& dp, CornerLines&) { dp.fused.out_rounding = OutputRounding::rz; }), 1980);
}

}  // namespace
}  // namespace fp4sim
