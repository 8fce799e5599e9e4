// HDF5 layer (hdf5.hpp) and trace reader/writer (trace.hpp): round trips, and every rule of
// trace-format.md broken on purpose with a clear message naming the path and the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "fp4sim/error.hpp"
#include "fp4sim/hdf5.hpp"

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
