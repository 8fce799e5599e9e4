// `fp4sim datapath identify FOLDERS`: which datapath rows reproduce measured tensor-core outputs
// (docs/cli.md, docs/datapaths.md §8). A folder holds one instruction's measurement in the vendored format
// of tests/data/tensorcore_corners: a, b (hex FP32 tokens), c, d (32-digit binary FP32), and for the
// block-scaled instructions sa, sb (hex scale codes); each file .txt.gz or .txt, line i = case i.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <zlib.h>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/datapath_identify.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/json.hpp"

namespace fp4sim::cli {

namespace {

namespace fs = std::filesystem;

struct IdentifyOptions {
  std::vector<std::string> folders;
  bool json = false;
};

// `<folder>/<name>.txt.gz`, else `<name>.txt` (zlib reads either); DataError when neither is there.
std::vector<std::string> read_lines(const fs::path& folder, const std::string& name) {
  fs::path path = folder / (name + ".txt.gz");
  if (!fs::exists(path)) path = folder / (name + ".txt");
  gzFile file = fs::exists(path) ? gzopen(path.c_str(), "rb") : nullptr;
  if (!file) throw DataError(folder.string() + ": cannot read " + name + ".txt.gz or " + name + ".txt");
  std::vector<std::string> lines;
  std::string current;
  char buffer[1 << 16];
  while (gzgets(file, buffer, sizeof buffer)) {
    current += buffer;
    if (current.back() == '\n') {
      current.pop_back();
      lines.push_back(std::move(current));
      current.clear();
    }
  }
  int status = Z_OK;
  gzerror(file, &status);
  gzclose(file);
  if (status != Z_OK && status != Z_STREAM_END) throw DataError(path.string() + ": not a readable gzip file");
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

std::uint32_t parse_hex(const std::string& token, const fs::path& file, std::size_t line) {
  std::size_t used = 0;
  unsigned long v = 0;
  try {
    v = std::stoul(token, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != token.size() || v > 0xFFFFFFFFul)
    throw DataError(file.string() + " line " + std::to_string(line + 1) + ": '" + token + "' is not a hex word");
  return static_cast<std::uint32_t>(v);
}

std::vector<std::vector<std::uint32_t>> hex_lines(const fs::path& folder, const std::string& name) {
  std::vector<std::vector<std::uint32_t>> out;
  const std::vector<std::string> lines = read_lines(folder, name);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::uint32_t> words;
    std::size_t pos = 0;
    while ((pos = lines[i].find_first_not_of(" \t\r", pos)) != std::string::npos) {
      const std::size_t end = lines[i].find_first_of(" \t\r", pos);
      words.push_back(parse_hex(lines[i].substr(pos, end - pos), folder / name, i));
      pos = end;
    }
    out.push_back(std::move(words));
  }
  return out;
}

std::vector<std::uint32_t> binary_lines(const fs::path& folder, const std::string& name) {
  std::vector<std::uint32_t> out;
  const std::vector<std::string> lines = read_lines(folder, name);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string digits = lines[i];
    while (!digits.empty() && (digits.back() == '\r' || digits.back() == ' ')) digits.pop_back();
    if (digits.size() != 32 || digits.find_first_not_of("01") != std::string::npos)
      throw DataError((folder / name).string() + " line " + std::to_string(i + 1) + ": expected 32 binary digits");
    out.push_back(static_cast<std::uint32_t>(std::stoul(digits, nullptr, 2)));
  }
  return out;
}

Measurement read_measurement(const fs::path& folder) {
  if (!fs::is_directory(folder)) throw DataError(folder.string() + ": not a measurement folder");
  Measurement m;
  try {
    fs::path name = fs::absolute(folder).lexically_normal();
    if (name.filename().empty()) name = name.parent_path();  // "dir/" names dir
    m.instruction = parse_instruction_name(name.filename().string());
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + " (" + folder.string() + ")");
  }
  m.a = hex_lines(folder, "a");
  m.b = hex_lines(folder, "b");
  m.c = binary_lines(folder, "c");
  m.d = binary_lines(folder, "d");
  if (m.instruction.scale_format) {
    m.scale_a = hex_lines(folder, "sa");
    m.scale_b = hex_lines(folder, "sb");
  }
  return m;
}

std::string describe(const MeasuredInstruction& ins) {
  std::string s = ins.a_input + " x " + ins.b_input;
  if (ins.scale_format)
    s += ", " + format_name(*ins.scale_format) + " scales per " + std::to_string(ins.scale_block);
  return s + (ins.f16_accumulator ? " -> f16" : " -> f32");
}

void run_identify(const IdentifyOptions& o) {
  // Every folder is read and judged before anything is printed: a bad one leaves no partial report.
  std::vector<std::pair<Measurement, std::vector<RowFit>>> results;
  for (const std::string& folder : o.folders) {
    Measurement m = read_measurement(folder);
    std::vector<RowFit> fits;
    try {
      fits = identify(m);
    } catch (const DataError& e) {
      throw DataError(folder + ": " + e.what());
    }
    results.emplace_back(std::move(m), std::move(fits));
  }
  if (o.json) {
    std::printf("[\n");
    for (std::size_t f = 0; f < results.size(); ++f) {
      const auto& [m, fits] = results[f];
      std::printf("  {\"folder\": %s, \"instruction\": %s, \"lines\": %zu, \"rows\": [", json::string(o.folders[f]).c_str(),
                  json::string(describe(m.instruction)).c_str(), m.d.size());
      for (std::size_t r = 0; r < fits.size(); ++r) {
        std::printf("%s\n    {\"row\": %s, \"differ\": %zu, \"differing_lines\": [", r ? "," : "",
                    json::string(fits[r].row->name).c_str(), fits[r].differing.size());
        for (std::size_t i = 0; i < fits[r].differing.size(); ++i)
          std::printf("%s%zu", i ? ", " : "", fits[r].differing[i]);
        std::printf("]}");
      }
      std::printf("]}%s\n", f + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
    return;
  }
  for (std::size_t f = 0; f < results.size(); ++f) {
    const auto& [m, fits] = results[f];
    std::printf("%s: %zu lines, %s\n", o.folders[f].c_str(), m.d.size(), describe(m.instruction).c_str());
    if (fits.empty()) std::printf("  no row takes these formats\n");
    for (const RowFit& fit : fits) {
      if (fit.differing.empty())
        std::printf("  %-20s reproduces every output\n", std::string(fit.row->name).c_str());
      else
        std::printf("  %-20s %zu of %zu differ (first: line %zu)\n", std::string(fit.row->name).c_str(),
                    fit.differing.size(), fit.lines, fit.differing.front() + 1);
    }
  }
}

}  // namespace

void setup_datapath(CLI::App& app) {
  app.require_subcommand(1);
  add_example(app, "fp4sim datapath identify --json tests/data/tensorcore_corners/H200/wgmma_bf16_f32");
  CLI::App& identify = *app.add_subcommand(
      "identify", "say which datapath rows reproduce every output of measurement folders (tests/data/tensorcore_corners format)");
  auto o = std::make_shared<IdentifyOptions>();
  identify.add_option("FOLDERS", o->folders,
                      "measurement folders named <instruction>_<a>[_<b>][_<scale>_block<n>]_<f32|f16>, "
                      "each with a, b, c, d (and sa, sb) .txt[.gz]")
      ->required();
  identify.add_flag("--json", o->json, "one JSON object per folder, with every differing line (0-based) per row");
  add_example(identify, "fp4sim datapath identify tests/data/tensorcore_corners/H200/*");
  identify.callback([o] { run_identify(*o); });
}

}  // namespace fp4sim::cli
