// HDF5 through the C library, in the style of BlueBrain/HighFive (its Object and h5*_wrapper): one move-only RAII handle per id type
// with its own H5?close, each C call wrapped once and checked against its documented failure value,
// failures thrown as fp4sim::DataError naming the file, the object path, the operation and the HDF5
// error stack (walked upward with H5Ewalk2), and a guard that silences HDF5's automatic printing.
//
// Writing goes through fp4sim::OutputPath: File::create(path) writes to a temporary name, and
// File::commit() closes and renames it into place, so a failed command leaves no partial file.
//
//   auto f = fp4sim::hdf5::File::create("Q.h5");
//   f.write_dataset<std::uint8_t>("codes", {rows, (cols + 1) / 2}, codes);
//   f.write_attribute("recipe", "ue5m3");
//   f.write_attribute("block_cols", std::int64_t{16});
//   f.write_attribute("tensor_amax", 3.5f);
//   f.commit();
//
// The HDF5 library used here is not built thread-safe: call it from one thread at a time.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/io/output_file.hpp"

namespace fp4sim::hdf5 {

// ---------------------------------------------------------------------------------------------
// Errors

// Switches off HDF5's automatic error printing to stderr for its lifetime and restores the previous
// handler afterwards (HighFive SilenceHDF5). Nests.
class SilenceErrors {
 public:
  SilenceErrors();
  ~SilenceErrors();
  SilenceErrors(const SilenceErrors&) = delete;
  SilenceErrors& operator=(const SilenceErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The current HDF5 error stack, innermost call first ("H5Dread: ...; H5D__read: ..."), then cleared.
// Empty when the stack is empty.
std::string take_error_stack();

// Throws DataError "<file>: <object>: <operation> failed[: <HDF5 error stack>]".
[[noreturn]] void fail(std::string_view file, std::string_view object, std::string_view operation);

// ---------------------------------------------------------------------------------------------
// Handles

namespace detail {
herr_t close_nothrow(hid_t id, herr_t (*close)(hid_t)) noexcept;  // logs a failure to stderr
}

// Owns one hid_t; a move leaves H5I_INVALID_HID behind; the destructor closes with Close and never
// throws (HighFive Object).
template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }
  void reset() {
    if (id_ >= 0) detail::close_nothrow(std::exchange(id_, H5I_INVALID_HID), Close);
  }
  // Closes now and reports a failure (a file's close is where buffered writes can fail).
  herr_t close() {
    if (id_ < 0) return 0;
    return Close(std::exchange(id_, H5I_INVALID_HID));
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using FileHandle = Handle<&H5Fclose>;
using GroupHandle = Handle<&H5Gclose>;
using DatasetHandle = Handle<&H5Dclose>;
using DataspaceHandle = Handle<&H5Sclose>;
using DatatypeHandle = Handle<&H5Tclose>;
using AttributeHandle = Handle<&H5Aclose>;
using PropertyListHandle = Handle<&H5Pclose>;
using ObjectHandle = Handle<&H5Oclose>;

// ---------------------------------------------------------------------------------------------
// Types: one specialisation per C++ type (HighFive AtomicType<T>); no type ids at call sites.

template <class T>
struct AtomicType;
#define FP4SIM_HDF5_ATOMIC(T, MEM, FILE)          \
  template <>                                     \
  struct AtomicType<T> {                          \
    static hid_t memory() { return MEM; }         \
    static hid_t file() { return FILE; }          \
  }
FP4SIM_HDF5_ATOMIC(float, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
FP4SIM_HDF5_ATOMIC(double, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
FP4SIM_HDF5_ATOMIC(std::uint8_t, H5T_NATIVE_UINT8, H5T_STD_U8LE);
FP4SIM_HDF5_ATOMIC(std::uint16_t, H5T_NATIVE_UINT16, H5T_STD_U16LE);
FP4SIM_HDF5_ATOMIC(std::uint32_t, H5T_NATIVE_UINT32, H5T_STD_U32LE);
FP4SIM_HDF5_ATOMIC(std::uint64_t, H5T_NATIVE_UINT64, H5T_STD_U64LE);
FP4SIM_HDF5_ATOMIC(std::int8_t, H5T_NATIVE_INT8, H5T_STD_I8LE);
FP4SIM_HDF5_ATOMIC(std::int16_t, H5T_NATIVE_INT16, H5T_STD_I16LE);
FP4SIM_HDF5_ATOMIC(std::int32_t, H5T_NATIVE_INT32, H5T_STD_I32LE);
FP4SIM_HDF5_ATOMIC(std::int64_t, H5T_NATIVE_INT64, H5T_STD_I64LE);
#undef FP4SIM_HDF5_ATOMIC

// What a stored element type is, as the trace rules need it.
enum class TypeClass : std::uint8_t { float32, float64, other };

// ---------------------------------------------------------------------------------------------
// Objects

// Storage options for a new dataset. Chunk dimensions of 0 mean "choose" (whole rows, about 1 MiB).
struct DatasetOptions {
  std::vector<hsize_t> chunk;  // empty: contiguous unless gzip/shuffle asks for chunks
  int gzip = 0;                // 0: no deflate; 1..9: level
  bool shuffle = false;
};

// Common to files, groups and datasets: a name for messages and the attributes.
class Object {
 public:
  const std::string& file_name() const { return *file_; }
  const std::string& path() const { return path_; }  // "/step_000001/lm_head/x"
  hid_t id() const { return id_; }

  bool has_attribute(std::string_view name) const;

  // Readers: throw DataError naming the attribute when it is absent or of another class.
  // read_string accepts fixed and variable length strings, scalar or one-element 1-D.
  std::string read_string_attribute(std::string_view name) const;
  // Any integer class (signed or unsigned, any width up to 64 bits), scalar or one-element.
  std::int64_t read_int_attribute(std::string_view name) const;
  // Any integer or float class, converted to double.
  double read_double_attribute(std::string_view name) const;
  // The HDF5 type class of an attribute (H5T_STRING, H5T_INTEGER, ...); throws when absent.
  H5T_class_t attribute_class(std::string_view name) const;

  // Writers: variable-length UTF-8 strings (as h5py writes them), 64-bit integers, float32/64 scalars.
  // An existing attribute of that name is replaced.
  void write_attribute(std::string_view name, std::string_view value) const;
  void write_attribute(std::string_view name, const char* value) const {
    write_attribute(name, std::string_view(value));
  }
  void write_attribute(std::string_view name, std::int64_t value) const;
  void write_attribute(std::string_view name, int value) const {
    write_attribute(name, static_cast<std::int64_t>(value));
  }
  void write_attribute(std::string_view name, float value) const;
  void write_attribute(std::string_view name, double value) const;
  // A 1-D integer array attribute (e.g. capture_steps).
  void write_attribute(std::string_view name, std::span<const std::int64_t> values) const;

  [[noreturn]] void fail(std::string_view operation) const;
  [[noreturn]] void fail_rule(std::string_view rule) const;  // DataError without an HDF5 stack

 protected:
  Object(std::shared_ptr<const std::string> file, std::string path, hid_t id)
      : file_(std::move(file)), path_(std::move(path)), id_(id) {}
  std::string child_path(std::string_view name) const;
  void delete_attribute_if_present(std::string_view name) const;

  std::shared_ptr<const std::string> file_;
  std::string path_;
  hid_t id_ = H5I_INVALID_HID;  // owned by the derived class's handle
};

class Dataset : public Object {
 public:
  Dataset(std::shared_ptr<const std::string> file, std::string path, DatasetHandle handle)
      : Object(std::move(file), std::move(path), handle.get()), handle_(std::move(handle)) {}
  Dataset(Dataset&& other) noexcept = default;
  Dataset& operator=(Dataset&&) noexcept = default;

  std::vector<hsize_t> shape() const;
  TypeClass type_class() const;
  std::string type_description() const;  // "float32", "float16", "int32", "string", ...
  bool is_chunked() const;

  // Reads rows [row0, row0 + nrows) of a 2-D dataset into out (nrows * cols values), converting the
  // stored element type to T as HDF5 does (exact for float32 -> float/double and float64 -> double).
  template <class T>
  void read_rows(hsize_t row0, hsize_t nrows, std::span<T> out) const {
    read_block_raw(row0, nrows, std::nullopt, AtomicType<T>::memory(), out.data(), out.size());
  }
  // Rows [row0, row0 + nrows) of columns [col0, col0 + ncols) of a 2-D dataset (nrows * ncols values).
  template <class T>
  void read_block(hsize_t row0, hsize_t nrows, hsize_t col0, hsize_t ncols, std::span<T> out) const {
    read_block_raw(row0, nrows, std::pair{col0, ncols}, AtomicType<T>::memory(), out.data(), out.size());
  }
  // The whole dataset, any rank.
  template <class T>
  std::vector<T> read_all() const {
    std::vector<T> out(element_count());
    read_all_raw(AtomicType<T>::memory(), out.data());
    return out;
  }
  // Writes rows [row0, row0 + nrows) of a 2-D dataset from data (nrows * cols values).
  template <class T>
  void write_rows(hsize_t row0, hsize_t nrows, std::span<const T> data) const {
    write_rows_raw(row0, nrows, AtomicType<T>::memory(), data.data(), data.size());
  }
  template <class T>
  void write_all(std::span<const T> data) const {
    write_all_raw(AtomicType<T>::memory(), data.data(), data.size());
  }

  std::size_t element_count() const;

 private:
  // columns: (first, count); none: all columns.
  void read_block_raw(hsize_t row0, hsize_t nrows, std::optional<std::pair<hsize_t, hsize_t>> columns, hid_t mem_type,
                      void* out, std::size_t n) const;
  void read_all_raw(hid_t mem_type, void* out) const;
  void write_rows_raw(hsize_t row0, hsize_t nrows, hid_t mem_type, const void* data, std::size_t n) const;
  void write_all_raw(hid_t mem_type, const void* data, std::size_t n) const;
  DataspaceHandle block_selection(hsize_t row0, hsize_t nrows, std::optional<std::pair<hsize_t, hsize_t>> columns,
                                  std::size_t n, DataspaceHandle& memspace) const;

  DatasetHandle handle_;
};

enum class ChildKind : std::uint8_t { group, dataset, other };
struct Child {
  std::string name;
  ChildKind kind = ChildKind::other;
};

// A file or a group: something that holds links.
class Group : public Object {
 public:
  Group(std::shared_ptr<const std::string> file, std::string path, GroupHandle handle)
      : Object(std::move(file), std::move(path), handle.get()), handle_(std::move(handle)) {}
  Group(Group&& other) noexcept = default;
  Group& operator=(Group&&) noexcept = default;

  // Children in name order (H5_INDEX_NAME, increasing) with their kind; soft/external links that do
  // not resolve are reported as `other`.
  std::vector<Child> children() const;
  bool exists(std::string_view name) const;  // a link of that name that resolves to an object
  Group open_group(std::string_view name) const;
  Dataset open_dataset(std::string_view name) const;

  Group create_group(std::string_view name) const;
  template <class T>
  Dataset create_dataset(std::string_view name, std::span<const hsize_t> dims,
                         const DatasetOptions& options = {}) const {
    return create_dataset_raw(name, dims, AtomicType<T>::file(), options);
  }
  template <class T>
  Dataset write_dataset(std::string_view name, std::initializer_list<hsize_t> dims, std::span<const T> data,
                        const DatasetOptions& options = {}) const {
    return write_dataset<T>(name, std::span<const hsize_t>(dims.begin(), dims.size()), data, options);
  }
  template <class T>
  Dataset write_dataset(std::string_view name, std::span<const hsize_t> dims, std::span<const T> data,
                        const DatasetOptions& options = {}) const {
    Dataset d = create_dataset<T>(name, dims, options);
    d.write_all<T>(data);
    return d;
  }
  // Overload so a std::vector<T> argument deduces T.
  template <class T>
  Dataset write_dataset(std::string_view name, std::initializer_list<hsize_t> dims, const std::vector<T>& data,
                        const DatasetOptions& options = {}) const {
    return write_dataset<T>(name, dims, std::span<const T>(data), options);
  }
  // A 1-D dataset of variable-length UTF-8 strings (as h5py writes str arrays).
  Dataset write_strings(std::string_view name, std::span<const std::string> values) const;
  // A dataset of any HDF5 file type (tests use it to write types the trace format rejects).
  Dataset create_dataset_raw(std::string_view name, std::span<const hsize_t> dims, hid_t file_type,
                             const DatasetOptions& options = {}) const;

 protected:
  GroupHandle handle_;
};

// An HDF5 file, usable as its root group.
class File : public Group {
 public:
  // Opens read-only. A path that does not exist, is not HDF5 or is truncated is a DataError naming it.
  static File open(const std::filesystem::path& path);
  // Opens a file image held in memory read-only (the core driver, no backing store; HDF5 copies the
  // bytes), named `name` in messages: what a file of those bytes would give, without the file system.
  static File open_image(std::span<const std::byte> image, const std::string& name);
  // Creates path's temporary (OutputPath) for writing; commit() closes it and renames it into place;
  // destroyed without commit() the temporary is removed.
  static File create(const std::filesystem::path& path);

  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  ~File();

  // Flushes and closes the file, then renames the temporary into place (writers only).
  void commit();

 private:
  File(std::shared_ptr<const std::string> name, FileHandle handle, std::unique_ptr<OutputPath> output);
  std::unique_ptr<OutputPath> output_;  // declared first: destroyed after the handles
  FileHandle file_handle_;
};

}  // namespace fp4sim::hdf5
