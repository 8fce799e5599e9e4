// HDF5 layer (hdf5.hpp) and trace reader/writer (trace.hpp): round trips, and every rule of
// docs/trace-format.md broken on purpose with a clear message naming the path and the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/io/hdf5.hpp"

namespace fs = std::filesystem;
using fp4sim::DataError;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fp4sim_trace_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

// The DataError message of f(), or "" when it does not throw DataError.
template <class F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

bool has_temporaries(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// hdf5.hpp

TEST(Hdf5, WriterRoundTripsDatasetsAndAttributes) {
  const fs::path path = scratch("roundtrip.h5");
  fs::remove(path);
  {
    auto f = fp4sim::hdf5::File::create(path);
    EXPECT_FALSE(fs::exists(path)) << "written under a temporary name until commit()";
    const std::vector<std::uint8_t> codes = {0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB};
    f.write_dataset<std::uint8_t>("codes", {2, 3}, codes);
    const std::vector<float> deq = {1.5f, -2.0f, 0.0f, std::numeric_limits<float>::infinity()};
    auto d = f.write_dataset<float>("dequantized", {2, 2}, deq, {.chunk = {1, 0}, .gzip = 4, .shuffle = true});
    d.write_attribute("role", "activation");
    f.write_attribute("recipe", "ue5m3");
    f.write_attribute("block_cols", std::int64_t{16});
    f.write_attribute("tensor_amax", 3.5f);
    f.write_attribute("g", 0.25);
    f.write_attribute("recipe", "nvfp4");  // replaces
    const std::vector<std::int64_t> steps = {1, 200, 2000};
    f.write_attribute("capture_steps", std::span<const std::int64_t>(steps));
    f.create_group("a/b").write_attribute("x", 1);
    f.commit();
  }
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(has_temporaries(path.parent_path()));

  auto f = fp4sim::hdf5::File::open(path);
  EXPECT_EQ(f.read_string_attribute("recipe"), "nvfp4");
  EXPECT_EQ(f.read_int_attribute("block_cols"), 16);
  EXPECT_EQ(f.read_double_attribute("tensor_amax"), 3.5);
  EXPECT_EQ(f.read_double_attribute("g"), 0.25);
  EXPECT_EQ(f.attribute_class("tensor_amax"), H5T_FLOAT);
  auto codes = f.open_dataset("codes");
  EXPECT_EQ(codes.shape(), (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(codes.type_description(), "uint8");
  EXPECT_EQ(codes.read_all<std::uint8_t>(), (std::vector<std::uint8_t>{0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB}));
  auto deq = f.open_dataset("dequantized");
  EXPECT_TRUE(deq.is_chunked());
  EXPECT_EQ(deq.type_class(), fp4sim::hdf5::TypeClass::float32);
  EXPECT_EQ(deq.read_string_attribute("role"), "activation");
  std::vector<double> row(2);
  deq.read_rows<double>(1, 1, row);
  EXPECT_EQ(row[0], 0.0);
  EXPECT_TRUE(std::isinf(row[1]));
  EXPECT_TRUE(f.exists("a/b"));
  EXPECT_FALSE(f.exists("a/c"));
  EXPECT_FALSE(f.exists("nope/deeper"));
  EXPECT_EQ(f.open_group("a/b").read_int_attribute("x"), 1);
  const auto kids = f.children();
  ASSERT_EQ(kids.size(), 3u);
  EXPECT_EQ(kids[0].name, "a");
  EXPECT_EQ(kids[0].kind, fp4sim::hdf5::ChildKind::group);
  EXPECT_EQ(kids[1].kind, fp4sim::hdf5::ChildKind::dataset);
}

TEST(Hdf5, UncommittedWriterLeavesNoFile) {
  const fs::path path = scratch("uncommitted.h5");
  fs::remove(path);
  {
    auto f = fp4sim::hdf5::File::create(path);
    f.write_dataset<float>("x", {1, 1}, std::vector<float>{1.0f});
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(has_temporaries(path.parent_path()));
}

TEST(Hdf5, ErrorsNameFileObjectAndOperation) {
  const fs::path path = scratch("errors.h5");
  {
    auto f = fp4sim::hdf5::File::create(path);
    f.write_dataset<float>("x", {1, 1}, std::vector<float>{1.0f});
    f.commit();
  }
  auto f = fp4sim::hdf5::File::open(path);
  std::string m = data_error([&] { f.open_dataset("missing"); });
  EXPECT_NE(m.find(path.string()), std::string::npos) << m;
  EXPECT_NE(m.find("/missing"), std::string::npos) << m;
  EXPECT_NE(m.find("H5Dopen2"), std::string::npos) << m;
  EXPECT_NE(m.find("HDF5:"), std::string::npos) << "error stack walked into the message: " << m;
  m = data_error([&] { f.read_string_attribute("schema"); });
  EXPECT_NE(m.find("@schema is missing"), std::string::npos) << m;
  m = data_error([&] { fp4sim::hdf5::File::open(scratch("does_not_exist.h5")); });
  EXPECT_NE(m.find("no such file"), std::string::npos) << m;
}

TEST(Hdf5, SilenceRestoresAutomaticPrinting) {
  H5E_auto2_t before = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &before, &data);
  {
    fp4sim::hdf5::SilenceErrors quiet;
    H5E_auto2_t inside = reinterpret_cast<H5E_auto2_t>(1);
    H5Eget_auto2(H5E_DEFAULT, &inside, &data);
    EXPECT_EQ(inside, nullptr);
  }
  H5E_auto2_t after = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &after, &data);
  EXPECT_EQ(after, before);
}

// ---------------------------------------------------------------------------------------------
// trace.hpp: a valid trace, then every rule of docs/trace-format.md broken on purpose.

#include "fp4sim/io/trace.hpp"

namespace {

using fp4sim::trace::Reader;
using fp4sim::trace::Writer;

std::vector<float> ramp(std::size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 37) - 18) / 7.0f;
  return v;
}

// One layer "blk.0.fc" at each step: x [tokens, in], w [out, in], dy [tokens, out].
void write_layer(Writer& w, std::int64_t step, const std::string& layer, std::size_t tokens = 32, std::size_t in = 48,
                 std::size_t out = 16) {
  w.write_tensor(step, layer, "x", tokens, in, ramp(tokens * in), "bfloat16");
  w.write_tensor(step, layer, "w", out, in, ramp(out * in, 0.05f));
  w.write_tensor(step, layer, "dy", tokens, out, ramp(tokens * out, 1e-4f));
}

// Writes a valid trace, lets `mutate` break it through the HDF5 C API, commits.
template <class Mutate>
fs::path make_trace(const std::string& name, Mutate&& mutate) {
  const fs::path path = scratch(name);
  Writer w(path, {.model = "test", .framework = "", .notes = "", .gzip = 4, .shuffle = true, .chunk_rows = 0});
  write_layer(w, 1, "blk.0.fc");
  write_layer(w, 2, "blk.0.fc");
  mutate(w);
  w.commit();
  return path;
}

fs::path valid_trace() {
  return make_trace("valid.h5", [](Writer&) {});
}

// Expects Reader(path) to fail with a message holding every one of `needles`.
void expect_rejected(const fs::path& path, std::initializer_list<std::string> needles) {
  const std::string m = data_error([&] { Reader r(path); });
  ASSERT_FALSE(m.empty()) << path << " was accepted";
  EXPECT_NE(m.find(path.string()), std::string::npos) << "message names the file: " << m;
  for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "expected '" << n << "' in: " << m;
}

hid_t fid(Writer& w) { return w.file().id(); }

}  // namespace

TEST(Trace, ReadsWhatTheWriterWrote) {
  const fs::path path = valid_trace();
  Reader r(path);
  const auto& info = r.info();
  EXPECT_EQ(info.schema_version, 1);
  EXPECT_EQ(info.model, "test");
  ASSERT_EQ(info.steps.size(), 2u);
  EXPECT_EQ(info.steps[0].step, 1);
  EXPECT_EQ(info.steps[0].group, "step_000001");
  ASSERT_EQ(info.steps[0].layers.size(), 1u);
  const auto& layer = info.steps[0].layers[0];
  EXPECT_EQ(layer.name, "blk.0.fc");
  EXPECT_EQ(layer.x().rows, 32u);
  EXPECT_EQ(layer.x().cols, 48u);
  EXPECT_EQ(layer.x().orig_dtype, "bfloat16");
  EXPECT_EQ(layer.w().rows, 16u);
  EXPECT_EQ(layer.dy().path, "/step_000001/blk.0.fc/dy");
  EXPECT_TRUE(layer.x().chunked);
  EXPECT_EQ(r.read_float(layer.x()), ramp(32 * 48));
  // Hyperslab reads equal the whole.
  std::vector<float> rows(3 * 48);
  r.read_rows(layer.x(), 5, 3, std::span<float>(rows));
  const auto all = ramp(32 * 48);
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin() + 5 * 48));
  EXPECT_EQ(r.amax(layer.x(), 100), 18.0f / 7.0f);
}

TEST(Trace, ReadsTheSharedTraceA) {
  const fs::path path = fs::path(FP4SIM_SOURCE_DIR) / "traces" / "trace_a.h5";
  Reader r(path);
  ASSERT_EQ(r.info().steps.size(), 3u);
  EXPECT_EQ(r.info().steps[2].step, 2000);
  for (const auto& s : r.info().steps) {
    EXPECT_EQ(s.layers.size(), 10u);
    for (const auto& l : s.layers) {
      EXPECT_EQ(l.x().rows, 128u);
      EXPECT_EQ(l.x().cols, l.w().cols);
      EXPECT_EQ(l.dy().cols, l.w().rows);
    }
  }
  // README: the dy absmax of lm_head is 1/8160 (bf16-rounded: 1.2207e-4 = 2^-13).
  const auto& lm = r.info().steps[0].layers[0];
  EXPECT_EQ(lm.name, "lm_head");
  EXPECT_EQ(r.amax(lm.dy(), 1 << 20), 0x1p-13f);
}

// A trace held in memory (hdf5::File::open_image, the fuzzer's way in) reads as the file of those bytes.
TEST(Trace, FileImageReadsAsTheFile) {
  const fs::path path = valid_trace();
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Reader r(fp4sim::hdf5::File::open_image(std::as_bytes(std::span(bytes)), "image.h5"));
  const Reader from_file(path);
  EXPECT_EQ(r.path(), "image.h5");
  ASSERT_EQ(r.info().steps.size(), from_file.info().steps.size());
  const auto& x = r.info().steps[1].layers[0].x();
  EXPECT_EQ(r.read_float(x), from_file.read_float(from_file.info().steps[1].layers[0].x()));

  const std::vector<char> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2));
  const std::string m = data_error([&] { Reader half(fp4sim::hdf5::File::open_image(std::as_bytes(std::span(cut)), "half.h5")); });
  EXPECT_NE(m.find("half.h5"), std::string::npos) << m;
  EXPECT_NE(data_error([] { fp4sim::hdf5::File::open_image({}, "empty.h5"); }).find("empty.h5: empty file"),
            std::string::npos);
}

TEST(Trace, Float64AndRolesAndNestedLayers) {
  const fs::path path = scratch("f64.h5");
  {
    Writer w(path, {.model = "", .framework = "", .notes = "", .gzip = 0, .shuffle = false, .chunk_rows = 0});
    const std::vector<double> x = {1.0, 0.1, -2.5, 3.0};
    w.write_tensor(7, "model/layers/0/fc", "input", 2, 2, std::span<const double>(x), "", "activation");
    w.write_tensor(7, "model/layers/0/fc", "w", 3, 2, ramp(6));
    w.write_tensor(7, "model/layers/0/fc", "dy", 2, 3, ramp(6));
    w.write_tensor(7, "model/layers/0/fc", "notes", 1, 1, ramp(1));  // extra dataset: ignored
    w.commit();
  }
  Reader r(path);
  const auto& l = r.info().steps[0].layers.at(0);
  EXPECT_EQ(l.name, "model/layers/0/fc");
  EXPECT_EQ(l.x().name, "input");
  EXPECT_EQ(l.x().type, fp4sim::trace::ElementType::float64);
  EXPECT_EQ(l.tensors.size(), 3u);
  EXPECT_EQ(r.read_double(l.x())[1], 0.1);
  EXPECT_EQ(r.read_float(l.x())[1], 0.1f);  // rounded to nearest
}

// Version 2: a layer's forwards in one step are call groups, each its own layer to the reader; the
// quantized operands an FP4 layer used (uint8 codes and scales in an fp4/ subgroup) are extra content.
TEST(Trace, Version2CallGroupsAreLayers) {
  const fs::path path = scratch("v2.h5");
  {
    Writer w(path);
    w.file().write_attribute("schema_version", std::int64_t{2});
    write_layer(w, 3, "blk.0.fc/call_000001");
    write_layer(w, 3, "blk.0.fc/call_000002", 16);
    fp4sim::hdf5::Group fp4 = w.layer_group(3, "blk.0.fc/call_000001/fp4/fprop.a");
    const std::vector<std::uint8_t> codes(32 * 24, 0x21);
    fp4.write_dataset<std::uint8_t>("codes", {32, 24}, codes);
    w.commit();
  }
  Reader r(path);
  EXPECT_EQ(r.info().schema_version, 2);
  const auto& layers = r.info().steps.at(0).layers;
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].name, "blk.0.fc/call_000001");
  EXPECT_EQ(layers[1].name, "blk.0.fc/call_000002");
  EXPECT_EQ(layers[1].x().rows, 16u);
}

TEST(TraceRules, MissingSchema) {
  expect_rejected(make_trace("no_schema.h5", [](Writer& w) { H5Adelete(fid(w), "schema"); }),
                  {"/: ", "@schema is missing", "docs/trace-format.md"});
}

TEST(TraceRules, WrongSchema) {
  expect_rejected(make_trace("wrong_schema.h5", [](Writer& w) { w.file().write_attribute("schema", "fp8-trace"); }),
                  {"@schema is \"fp8-trace\"", "expected \"fp4-trace\""});
  expect_rejected(make_trace("int_schema.h5", [](Writer& w) { w.file().write_attribute("schema", std::int64_t{1}); }),
                  {"@schema must be the string"});
}

TEST(TraceRules, SchemaVersion) {
  expect_rejected(make_trace("no_version.h5", [](Writer& w) { H5Adelete(fid(w), "schema_version"); }),
                  {"@schema_version is missing"});
  expect_rejected(make_trace("v3.h5", [](Writer& w) { w.file().write_attribute("schema_version", std::int64_t{3}); }),
                  {"unknown @schema_version 3", "knows versions 1 and 2"});
  expect_rejected(make_trace("v0.h5", [](Writer& w) { w.file().write_attribute("schema_version", std::int64_t{0}); }),
                  {"unknown @schema_version 0"});
  expect_rejected(make_trace("v_str.h5", [](Writer& w) { w.file().write_attribute("schema_version", "1"); }),
                  {"@schema_version must be an integer"});
}

TEST(TraceRules, TensorNot2D) {
  expect_rejected(make_trace("three_d.h5",
                             [](Writer& w) {
                               auto g = w.layer_group(3, "blk.0.fc");
                               const hsize_t dims[3] = {2, 32, 48};
                               g.create_dataset<float>("x", std::span<const hsize_t>(dims));
                               g.write_dataset<float>("w", {16, 48}, ramp(16 * 48));
                               g.write_dataset<float>("dy", {32, 16}, ramp(32 * 16));
                             }),
                  {"/step_000003/blk.0.fc/x", "3-D [2, 32, 48]", "must be 2-D"});
  expect_rejected(make_trace("one_d.h5",
                             [](Writer& w) {
                               auto g = w.layer_group(3, "blk.0.fc");
                               g.write_dataset<float>("x", {32}, ramp(32));
                             }),
                  {"/step_000003/blk.0.fc/x", "1-D", "must be 2-D"});
}

TEST(TraceRules, ElementType) {
  expect_rejected(make_trace("int32.h5",
                             [](Writer& w) {
                               auto g = w.layer_group(3, "blk.0.fc");
                               g.write_dataset<std::int32_t>("w", {16, 48}, std::vector<std::int32_t>(16 * 48, 1));
                             }),
                  {"/step_000003/blk.0.fc/w", "element type int32", "float32 or float64"});
  expect_rejected(make_trace("float16.h5",
                             [](Writer& w) {
                               auto g = w.layer_group(3, "blk.0.fc");
                               // IEEE binary16 built from the float32 type (HDF5 1.10 has no predefined one).
                               hid_t t = H5Tcopy(H5T_IEEE_F32LE);
                               H5Tset_fields(t, 15, 10, 5, 0, 10);
                               H5Tset_precision(t, 16);
                               H5Tset_size(t, 2);
                               H5Tset_ebias(t, 15);
                               const hsize_t dims[2] = {32, 16};
                               g.create_dataset_raw("dy", std::span<const hsize_t>(dims), t);
                               H5Tclose(t);
                             }),
                  {"/step_000003/blk.0.fc/dy", "element type float16", "float32 or float64"});
}

TEST(TraceRules, Shapes) {
  auto layer = [](std::size_t xr, std::size_t xc, std::size_t wr, std::size_t wc, std::size_t dr, std::size_t dc) {
    return [=](Writer& w) {
      w.write_tensor(3, "bad", "x", xr, xc, ramp(xr * xc));
      w.write_tensor(3, "bad", "w", wr, wc, ramp(wr * wc));
      w.write_tensor(3, "bad", "dy", dr, dc, ramp(dr * dc));
    };
  };
  expect_rejected(make_trace("xw.h5", layer(32, 48, 16, 40, 32, 16)),
                  {"/step_000003/bad", "x [32, 48] and w [16, 40]", "x.cols == w.cols"});
  expect_rejected(make_trace("dyw.h5", layer(32, 48, 16, 48, 32, 17)),
                  {"/step_000003/bad", "dy [32, 17] and w [16, 48]", "dy.cols == w.rows"});
  expect_rejected(make_trace("xdy.h5", layer(32, 48, 16, 48, 31, 16)),
                  {"/step_000003/bad", "x [32, 48] and dy [31, 16]", "x.rows == dy.rows"});
}

TEST(TraceRules, MissingTensor) {
  expect_rejected(make_trace("no_dy.h5",
                             [](Writer& w) {
                               w.write_tensor(3, "half", "x", 4, 4, ramp(16));
                               w.write_tensor(3, "half", "w", 4, 4, ramp(16));
                             }),
                  {"/step_000003/half", "no dy (grad_output)", "x, w and dy are required"});
}

TEST(TraceRules, StepGroups) {
  expect_rejected(make_trace("no_step_attr.h5", [](Writer& w) { H5Adelete(w.step_group(2).id(), "step"); }),
                  {"/step_000002", "@step is missing"});
  expect_rejected(make_trace("step_mismatch.h5", [](Writer& w) { w.step_group(2).write_attribute("step", 5); }),
                  {"/step_000002", "@step = 5 disagrees with the group name"});
  expect_rejected(make_trace("step_float.h5", [](Writer& w) { w.step_group(2).write_attribute("step", 2.0); }),
                  {"/step_000002", "@step must be an integer"});
  expect_rejected(make_trace("short_name.h5",
                             [](Writer& w) {
                               auto g = w.file().create_group("step_12");
                               g.write_attribute("step", 12);
                             }),
                  {"/step_12", "zero-padded to 6 or more digits"});
  expect_rejected(make_trace("step_zero.h5",
                             [](Writer& w) {
                               w.step_group(0);
                               write_layer(w, 0, "blk.0.fc");
                             }),
                  {"/step_000000", "one-based"});
  expect_rejected(make_trace("empty_step.h5", [](Writer& w) { w.step_group(9); }),
                  {"/step_000009", "holds no layer group"});
  expect_rejected(make_trace("step_dataset.h5",
                             [](Writer& w) { w.file().write_dataset<float>("step_000010", {1, 1}, ramp(1)); }),
                  {"/step_000010", "a step must be a group"});
  expect_rejected(make_trace("dup_step.h5",
                             [](Writer& w) {
                               auto g = w.file().create_group("step_0000002");
                               g.write_attribute("step", 2);
                               auto l = g.create_group("blk.0.fc");
                               l.write_dataset<float>("x", {4, 4}, ramp(16));
                               l.write_dataset<float>("w", {4, 4}, ramp(16));
                               l.write_dataset<float>("dy", {4, 4}, ramp(16));
                             }),
                  {"step 2 appears twice"});
}

TEST(TraceRules, Roles) {
  expect_rejected(make_trace("bad_role.h5",
                             [](Writer& w) {
                               w.write_tensor(3, "r", "x", 4, 4, ramp(16), "", "activations");
                             }),
                  {"/step_000003/r/x", "unknown @role \"activations\""});
  expect_rejected(make_trace("dup_role.h5",
                             [](Writer& w) {
                               write_layer(w, 3, "r");
                               w.write_tensor(3, "r", "input", 32, 48, ramp(32 * 48), "", "activation");
                             }),
                  {"/step_000003/r/", "two datasets of role activation"});
}

TEST(TraceRules, ZeroSteps) {
  const fs::path path = scratch("zero_steps.h5");
  {
    Writer w(path);
    w.file().create_group("metadata");
    w.commit();
  }
  expect_rejected(path, {"no step groups"});
}

TEST(TraceRules, NotHdf5EmptyTruncatedCorrupted) {
  const fs::path text = scratch("text.h5");
  std::ofstream(text) << "step,x\n1,2\n";
  expect_rejected(text, {"not an HDF5 file"});

  const fs::path empty = scratch("empty.h5");
  std::ofstream(empty).close();
  expect_rejected(empty, {"empty file"});

  expect_rejected(scratch("missing.h5"), {"no such file"});
  try {  // not a regular file: a usage error, checked before anything opens it (check_input_path)
    Reader r(fs::temp_directory_path());
    ADD_FAILURE() << "a directory was accepted as a trace";
  } catch (const fp4sim::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }

  const fs::path valid = valid_trace();
  const auto size = fs::file_size(valid);
  for (const std::uintmax_t keep : {std::uintmax_t{8}, std::uintmax_t{100}, size / 2, size - 1}) {
    const fs::path cut = scratch("truncated_" + std::to_string(keep) + ".h5");
    fs::copy_file(valid, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    const std::string m = data_error([&] { Reader r(cut); });
    EXPECT_FALSE(m.empty()) << "truncated to " << keep << " bytes was accepted";
    EXPECT_NE(m.find(cut.string()), std::string::npos) << m;
    if (keep > 100) {
      EXPECT_NE(m.find("truncated"), std::string::npos) << m;
    }
  }

  // Corrupted metadata (superblock bytes overwritten after the signature): rejected at open.
  const fs::path bad_super = scratch("corrupt_super.h5");
  fs::copy_file(valid, bad_super, fs::copy_options::overwrite_existing);
  {
    std::fstream f(bad_super, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const std::string junk(64, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string m = data_error([&] { Reader r(bad_super); });
  EXPECT_FALSE(m.empty());
  EXPECT_NE(m.find(bad_super.string()), std::string::npos) << m;
}

// Random corruption of every region of a file is exercised through the CLI in replay_test.cpp
// (CorruptionFuzz): the HDF5 1.10 library itself can fault on some corrupted heaps, which the CLI turns
// into exit 3 with a message; in-process callers of Reader get DataError for everything HDF5 reports.
