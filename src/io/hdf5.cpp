#include "fp4sim/io/hdf5.hpp"

#include "fp4sim/io/input_path.hpp"
#include "hdf5_heap_guard.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace fp4sim::hdf5 {

// ---------------------------------------------------------------------------------------------
// Errors

SilenceErrors::SilenceErrors() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

SilenceErrors::~SilenceErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

namespace {

herr_t walk_one(unsigned n, const H5E_error2_t* err, void* client) {
  auto& out = *static_cast<std::string*>(client);
  if (n > 0) out += " <- ";
  out += err->func_name ? err->func_name : "?";
  out += "(): ";
  out += err->desc ? err->desc : "";
  return 0;
}

}  // namespace

std::string take_error_stack() {
  std::string out;
  // Walk upward: the most specific error first, the API call last (HighFive HDF5ErrMapper).
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, &walk_one, &out);
  H5Eclear2(H5E_DEFAULT);
  // Where the operating system said no (a full disk), its reason alone: the rest is HDF5's call chain.
  const std::string os_marker = "error message = '";
  if (const auto at = out.find(os_marker); at != std::string::npos) {
    const auto end = out.find('\'', at + os_marker.size());
    if (end != std::string::npos) return out.substr(at + os_marker.size(), end - at - os_marker.size());
  }
  std::replace(out.begin(), out.end(), '\n', ' ');  // one line
  return out;
}

void fail(std::string_view file, std::string_view object, std::string_view operation) {
  std::string message(file);
  if (!object.empty()) {
    message += ": ";
    message += object;
  }
  message += ": ";
  message += operation;
  message += " failed";
  const std::string stack = take_error_stack();
  if (!stack.empty()) message += " (HDF5: " + stack + ")";
  throw DataError(message);
}

namespace detail {
std::string& first_close_failure() {
  static std::string failure;
  return failure;
}

herr_t close_nothrow(hid_t id, herr_t (*close)(hid_t)) noexcept {
  SilenceErrors quiet;
  const herr_t status = close(id);
  // Not printed: the first failure is kept for File::commit() to report (a failed close of a dataset
  // is a failed write of its file; a reader's failed close loses nothing).
  if (status < 0) {
    const std::string stack = take_error_stack();
    if (first_close_failure().empty()) first_close_failure() = stack.empty() ? "close failed" : stack;
  }
  return status;
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Object

void Object::fail(std::string_view operation) const { hdf5::fail(*file_, path_, operation); }

void Object::fail_rule(std::string_view rule) const {
  throw DataError(*file_ + ": " + path_ + ": " + std::string(rule));
}

std::string Object::child_path(std::string_view name) const {
  std::string p = path_;
  if (p.empty() || p.back() != '/') p += '/';
  p += name;
  return p;
}

bool Object::has_attribute(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  const htri_t r = H5Aexists(id_, n.c_str());
  if (r < 0) fail("H5Aexists(" + n + ")");
  return r > 0;
}

namespace {

struct OpenAttribute {
  AttributeHandle attr;
  DatatypeHandle type;
  DataspaceHandle space;
};

}  // namespace

H5T_class_t Object::attribute_class(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  if (!has_attribute(name)) fail_rule("attribute @" + n + " is missing");
  AttributeHandle attr(H5Aopen(id_, n.c_str(), H5P_DEFAULT));
  if (!attr) fail("H5Aopen(@" + n + ")");
  DatatypeHandle type(H5Aget_type(attr.get()));
  if (!type) fail("H5Aget_type(@" + n + ")");
  const H5T_class_t c = H5Tget_class(type.get());
  if (c == H5T_NO_CLASS) fail("H5Tget_class(@" + n + ")");
  return c;
}

namespace {

// Opens an attribute that must hold exactly one element; returns the handles.
OpenAttribute open_single(const Object& o, const std::string& n) {
  if (!o.has_attribute(n)) o.fail_rule("attribute @" + n + " is missing");
  OpenAttribute a;
  a.attr = AttributeHandle(H5Aopen(o.id(), n.c_str(), H5P_DEFAULT));
  if (!a.attr) o.fail("H5Aopen(@" + n + ")");
  a.type = DatatypeHandle(H5Aget_type(a.attr.get()));
  if (!a.type) o.fail("H5Aget_type(@" + n + ")");
  a.space = DataspaceHandle(H5Aget_space(a.attr.get()));
  if (!a.space) o.fail("H5Aget_space(@" + n + ")");
  const hssize_t count = H5Sget_simple_extent_npoints(a.space.get());
  if (count < 0) o.fail("H5Sget_simple_extent_npoints(@" + n + ")");
  if (count != 1) o.fail_rule("attribute @" + n + " must hold one value, it holds " + std::to_string(count));
  return a;
}

}  // namespace

std::string Object::read_string_attribute(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  OpenAttribute a = open_single(*this, n);
  if (H5Tget_class(a.type.get()) != H5T_STRING) fail_rule("attribute @" + n + " must be a string");
  const htri_t variable = H5Tis_variable_str(a.type.get());
  if (variable < 0) fail("H5Tis_variable_str(@" + n + ")");
  if (variable) {
    DatatypeHandle mem(H5Tcopy(H5T_C_S1));
    if (!mem || H5Tset_size(mem.get(), H5T_VARIABLE) < 0) fail("H5Tset_size(@" + n + ")");
    if (H5Tset_cset(mem.get(), H5Tget_cset(a.type.get())) < 0) fail("H5Tset_cset(@" + n + ")");
    char* value = nullptr;
    if (H5Aread(a.attr.get(), mem.get(), &value) < 0) fail("H5Aread(@" + n + ")");
    std::string out = value ? value : "";
    // The library allocated value; give it back the way it was allocated.
    H5Dvlen_reclaim(mem.get(), a.space.get(), H5P_DEFAULT, &value);
    return out;
  }
  const std::size_t size = H5Tget_size(a.type.get());
  if (size == 0) fail("H5Tget_size(@" + n + ")");
  std::string buffer(size, '\0');
  if (H5Aread(a.attr.get(), a.type.get(), buffer.data()) < 0) fail("H5Aread(@" + n + ")");
  // Fixed-length: null-terminated, null-padded or space-padded.
  const std::size_t nul = buffer.find('\0');
  if (nul != std::string::npos) buffer.resize(nul);
  if (H5Tget_strpad(a.type.get()) == H5T_STR_SPACEPAD) {
    while (!buffer.empty() && buffer.back() == ' ') buffer.pop_back();
  }
  return buffer;
}

std::int64_t Object::read_int_attribute(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  OpenAttribute a = open_single(*this, n);
  if (H5Tget_class(a.type.get()) != H5T_INTEGER) fail_rule("attribute @" + n + " must be an integer");
  const H5T_sign_t sign = H5Tget_sign(a.type.get());
  if (sign == H5T_SGN_NONE) {
    std::uint64_t v = 0;
    if (H5Aread(a.attr.get(), H5T_NATIVE_UINT64, &v) < 0) fail("H5Aread(@" + n + ")");
    if (v > static_cast<std::uint64_t>(INT64_MAX)) fail_rule("attribute @" + n + " is out of range");
    return static_cast<std::int64_t>(v);
  }
  std::int64_t v = 0;
  if (H5Aread(a.attr.get(), H5T_NATIVE_INT64, &v) < 0) fail("H5Aread(@" + n + ")");
  return v;
}

double Object::read_double_attribute(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  OpenAttribute a = open_single(*this, n);
  const H5T_class_t c = H5Tget_class(a.type.get());
  if (c != H5T_INTEGER && c != H5T_FLOAT) fail_rule("attribute @" + n + " must be a number");
  double v = 0;
  if (H5Aread(a.attr.get(), H5T_NATIVE_DOUBLE, &v) < 0) fail("H5Aread(@" + n + ")");
  return v;
}

void Object::delete_attribute_if_present(std::string_view name) const {
  if (has_attribute(name)) {
    const std::string n(name);
    if (H5Adelete(id_, n.c_str()) < 0) fail("H5Adelete(@" + n + ")");
  }
}

namespace {

void write_scalar_attribute(const Object& o, std::string_view name, hid_t file_type, hid_t mem_type,
                            const void* value) {
  SilenceErrors quiet;
  const std::string n(name);
  DataspaceHandle space(H5Screate(H5S_SCALAR));
  if (!space) o.fail("H5Screate(@" + n + ")");
  AttributeHandle attr(H5Acreate2(o.id(), n.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr) o.fail("H5Acreate2(@" + n + ")");
  if (H5Awrite(attr.get(), mem_type, value) < 0) o.fail("H5Awrite(@" + n + ")");
}

}  // namespace

void Object::write_attribute(std::string_view name, std::string_view value) const {
  SilenceErrors quiet;
  delete_attribute_if_present(name);
  DatatypeHandle type(H5Tcopy(H5T_C_S1));
  if (!type || H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0 ||
      H5Tset_strpad(type.get(), H5T_STR_NULLTERM) < 0) {
    fail("H5Tcopy/H5Tset_size(string @" + std::string(name) + ")");
  }
  const std::string copy(value);
  const char* pointer = copy.c_str();
  write_scalar_attribute(*this, name, type.get(), type.get(), &pointer);
}

void Object::write_attribute(std::string_view name, std::int64_t value) const {
  SilenceErrors quiet;
  delete_attribute_if_present(name);
  write_scalar_attribute(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void Object::write_attribute(std::string_view name, float value) const {
  SilenceErrors quiet;
  delete_attribute_if_present(name);
  write_scalar_attribute(*this, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &value);
}

void Object::write_attribute(std::string_view name, double value) const {
  SilenceErrors quiet;
  delete_attribute_if_present(name);
  write_scalar_attribute(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void Object::write_attribute(std::string_view name, std::span<const std::int64_t> values) const {
  SilenceErrors quiet;
  delete_attribute_if_present(name);
  const std::string n(name);
  const hsize_t dims[1] = {values.size()};
  DataspaceHandle space(H5Screate_simple(1, dims, nullptr));
  if (!space) fail("H5Screate_simple(@" + n + ")");
  AttributeHandle attr(H5Acreate2(id_, n.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr) fail("H5Acreate2(@" + n + ")");
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()) < 0) fail("H5Awrite(@" + n + ")");
}

// ---------------------------------------------------------------------------------------------
// Dataset

std::vector<hsize_t> Dataset::shape() const {
  SilenceErrors quiet;
  DataspaceHandle space(H5Dget_space(handle_.get()));
  if (!space) fail("H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail("H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) fail("H5Sget_simple_extent_dims");
  return dims;
}

std::size_t Dataset::element_count() const {
  std::size_t n = 1;
  for (hsize_t d : shape()) n *= d;
  return n;
}

TypeClass Dataset::type_class() const {
  SilenceErrors quiet;
  DatatypeHandle type(H5Dget_type(handle_.get()));
  if (!type) fail("H5Dget_type");
  if (H5Tget_class(type.get()) != H5T_FLOAT) return TypeClass::other;
  // IEEE binary32/binary64 in either byte order; HDF5 converts to native on read.
  const htri_t f32le = H5Tequal(type.get(), H5T_IEEE_F32LE), f32be = H5Tequal(type.get(), H5T_IEEE_F32BE);
  const htri_t f64le = H5Tequal(type.get(), H5T_IEEE_F64LE), f64be = H5Tequal(type.get(), H5T_IEEE_F64BE);
  if (f32le > 0 || f32be > 0) return TypeClass::float32;
  if (f64le > 0 || f64be > 0) return TypeClass::float64;
  return TypeClass::other;
}

std::string Dataset::type_description() const {
  SilenceErrors quiet;
  DatatypeHandle type(H5Dget_type(handle_.get()));
  if (!type) fail("H5Dget_type");
  const std::size_t bits = H5Tget_size(type.get()) * 8;
  switch (H5Tget_class(type.get())) {
    case H5T_FLOAT: {
      const TypeClass c = type_class();
      if (c == TypeClass::float32) return "float32";
      if (c == TypeClass::float64) return "float64";
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize);
      return "float" + std::to_string(bits) + " (" + std::to_string(esize) + " exponent, " + std::to_string(msize) +
             " mantissa bits)";
    }
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type.get()) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length";
    case H5T_OPAQUE: return "opaque";
    case H5T_BITFIELD: return "bitfield";
    case H5T_REFERENCE: return "reference";
    case H5T_TIME: return "time";
    default: return "unknown type";
  }
}

bool Dataset::is_chunked() const {
  SilenceErrors quiet;
  PropertyListHandle plist(H5Dget_create_plist(handle_.get()));
  if (!plist) fail("H5Dget_create_plist");
  return H5Pget_layout(plist.get()) == H5D_CHUNKED;
}

DataspaceHandle Dataset::block_selection(hsize_t row0, hsize_t nrows, std::optional<std::pair<hsize_t, hsize_t>> columns,
                                         std::size_t n, DataspaceHandle& memspace) const {
  DataspaceHandle space(H5Dget_space(handle_.get()));
  if (!space) fail("H5Dget_space");
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(space.get()) != 2) fail_rule("hyperslab access needs a 2-D dataset");
  if (H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) fail("H5Sget_simple_extent_dims");
  const auto [col0, ncols] = columns.value_or(std::pair<hsize_t, hsize_t>{0, dims[1]});
  if (row0 + nrows > dims[0]) fail_rule("rows " + std::to_string(row0) + "+" + std::to_string(nrows) + " out of range");
  if (col0 + ncols > dims[1]) fail_rule("columns " + std::to_string(col0) + "+" + std::to_string(ncols) + " out of range");
  if (n != nrows * ncols) fail_rule("buffer of " + std::to_string(n) + " values for " + std::to_string(nrows) + " rows");
  const hsize_t start[2] = {row0, col0}, count[2] = {nrows, ncols};
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0) fail("H5Sselect_hyperslab");
  memspace = DataspaceHandle(H5Screate_simple(2, count, nullptr));
  if (!memspace) fail("H5Screate_simple");
  return space;
}

void Dataset::read_block_raw(hsize_t row0, hsize_t nrows, std::optional<std::pair<hsize_t, hsize_t>> columns,
                             hid_t mem_type, void* out, std::size_t n) const {
  SilenceErrors quiet;
  if (nrows == 0 || (columns && columns->second == 0)) return;
  DataspaceHandle memspace;
  DataspaceHandle space = block_selection(row0, nrows, columns, n, memspace);
  if (H5Dread(handle_.get(), mem_type, memspace.get(), space.get(), H5P_DEFAULT, out) < 0) {
    fail("H5Dread(rows " + std::to_string(row0) + ".." + std::to_string(row0 + nrows) + ")");
  }
}

void Dataset::read_all_raw(hid_t mem_type, void* out) const {
  SilenceErrors quiet;
  if (H5Dread(handle_.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) fail("H5Dread");
}

void Dataset::write_rows_raw(hsize_t row0, hsize_t nrows, hid_t mem_type, const void* data, std::size_t n) const {
  SilenceErrors quiet;
  if (nrows == 0) return;
  DataspaceHandle memspace;
  DataspaceHandle space = block_selection(row0, nrows, std::nullopt, n, memspace);
  if (H5Dwrite(handle_.get(), mem_type, memspace.get(), space.get(), H5P_DEFAULT, data) < 0) {
    fail("H5Dwrite(rows " + std::to_string(row0) + ".." + std::to_string(row0 + nrows) + ")");
  }
}

void Dataset::write_all_raw(hid_t mem_type, const void* data, std::size_t n) const {
  SilenceErrors quiet;
  if (n != element_count()) {
    fail_rule("writing " + std::to_string(n) + " values into a dataset of " + std::to_string(element_count()));
  }
  if (n == 0) return;
  if (H5Dwrite(handle_.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) fail("H5Dwrite");
}

// ---------------------------------------------------------------------------------------------
// Group

namespace {

herr_t collect_child(hid_t group, const char* name, const H5L_info_t* info, void* client) {
  auto& out = *static_cast<std::vector<Child>*>(client);
  Child c;
  c.name = name;
  if (info->type == H5L_TYPE_HARD || info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
    // Resolve the link; a dangling one is `other`.
    const htri_t ok = H5Oexists_by_name(group, name, H5P_DEFAULT);
    if (ok > 0) {
      const hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
      if (obj >= 0) {
        const H5I_type_t t = H5Iget_type(obj);
        c.kind = t == H5I_GROUP ? ChildKind::group : t == H5I_DATASET ? ChildKind::dataset : ChildKind::other;
        H5Oclose(obj);
      }
    }
  }
  H5Eclear2(H5E_DEFAULT);
  out.push_back(std::move(c));
  return 0;
}

}  // namespace

std::vector<Child> Group::children() const {
  SilenceErrors quiet;
  std::vector<Child> out;
  hsize_t idx = 0;
  if (H5Literate(id_, H5_INDEX_NAME, H5_ITER_INC, &idx, &collect_child, &out) < 0) fail("H5Literate");
  return out;
}

bool Group::exists(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  if (n.empty() || n.find('/') != std::string::npos) {
    // Nested paths: check every prefix link (H5Lexists requires the intermediate links to exist).
    std::size_t pos = 0;
    while ((pos = n.find('/', pos + 1)) != std::string::npos) {
      const htri_t r = H5Lexists(id_, n.substr(0, pos).c_str(), H5P_DEFAULT);
      if (r <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
  }
  const htri_t link = H5Lexists(id_, n.c_str(), H5P_DEFAULT);
  if (link <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const htri_t obj = H5Oexists_by_name(id_, n.c_str(), H5P_DEFAULT);
  H5Eclear2(H5E_DEFAULT);
  return obj > 0;
}

Group Group::open_group(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  GroupHandle g(H5Gopen2(id_, n.c_str(), H5P_DEFAULT));
  if (!g) hdf5::fail(*file_, child_path(n), "H5Gopen2 (open group)");
  return Group(file_, child_path(n), std::move(g));
}

Dataset Group::open_dataset(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  DatasetHandle d(H5Dopen2(id_, n.c_str(), H5P_DEFAULT));
  if (!d) hdf5::fail(*file_, child_path(n), "H5Dopen2 (open dataset)");
  return Dataset(file_, child_path(n), std::move(d));
}

Group Group::create_group(std::string_view name) const {
  SilenceErrors quiet;
  const std::string n(name);
  // Intermediate groups are created as needed ("a/b/c").
  PropertyListHandle lcpl(H5Pcreate(H5P_LINK_CREATE));
  if (!lcpl || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) fail("H5Pset_create_intermediate_group");
  PropertyListHandle gcpl(H5Pcreate(H5P_GROUP_CREATE));
  if (!gcpl || H5Pset_obj_track_times(gcpl.get(), 0) < 0) fail("H5Pset_obj_track_times");
  GroupHandle g(H5Gcreate2(id_, n.c_str(), lcpl.get(), gcpl.get(), H5P_DEFAULT));
  if (!g) hdf5::fail(*file_, child_path(n), "H5Gcreate2 (create group)");
  return Group(file_, child_path(n), std::move(g));
}

Dataset Group::create_dataset_raw(std::string_view name, std::span<const hsize_t> dims, hid_t file_type,
                                  const DatasetOptions& options) const {
  SilenceErrors quiet;
  const std::string n(name);
  const std::string where = child_path(n);
  DataspaceHandle space(dims.empty() ? H5Screate(H5S_SCALAR)
                                     : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space) hdf5::fail(*file_, where, "H5Screate_simple");
  PropertyListHandle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!dcpl) hdf5::fail(*file_, where, "H5Pcreate(H5P_DATASET_CREATE)");
  // No creation/modification times in the object header: the same content gives the same bytes.
  if (H5Pset_obj_track_times(dcpl.get(), 0) < 0) hdf5::fail(*file_, where, "H5Pset_obj_track_times");
  std::vector<hsize_t> chunk = options.chunk;
  const bool filtered = options.gzip > 0 || options.shuffle;
  if (chunk.empty() && filtered && !dims.empty()) chunk.assign(dims.size(), 0);
  std::size_t total = 1;
  for (hsize_t d : dims) total *= d;
  if (!chunk.empty() && total > 0) {
    if (chunk.size() != dims.size()) throw DataError(*file_ + ": " + where + ": chunk rank differs from dataset rank");
    // 0 = choose: whole trailing dimensions, leading dimension sized to about 1 MiB.
    const std::size_t element = H5Tget_size(file_type);
    std::size_t row_bytes = element;
    for (std::size_t i = 1; i < dims.size(); ++i) {
      if (chunk[i] == 0) chunk[i] = dims[i];
      chunk[i] = std::clamp<hsize_t>(chunk[i], 1, std::max<hsize_t>(dims[i], 1));
      row_bytes *= chunk[i];
    }
    if (chunk[0] == 0) chunk[0] = std::max<hsize_t>(1, (std::size_t{1} << 20) / std::max<std::size_t>(row_bytes, 1));
    chunk[0] = std::clamp<hsize_t>(chunk[0], 1, std::max<hsize_t>(dims[0], 1));
    if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0) {
      hdf5::fail(*file_, where, "H5Pset_chunk");
    }
    if (options.shuffle && H5Pset_shuffle(dcpl.get()) < 0) hdf5::fail(*file_, where, "H5Pset_shuffle");
    if (options.gzip > 0 && H5Pset_deflate(dcpl.get(), static_cast<unsigned>(options.gzip)) < 0) {
      hdf5::fail(*file_, where, "H5Pset_deflate");
    }
  }
  PropertyListHandle lcpl(H5Pcreate(H5P_LINK_CREATE));
  if (!lcpl || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
    hdf5::fail(*file_, where, "H5Pset_create_intermediate_group");
  }
  DatasetHandle d(H5Dcreate2(id_, n.c_str(), file_type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  if (!d) hdf5::fail(*file_, where, "H5Dcreate2 (create dataset)");
  return Dataset(file_, where, std::move(d));
}

Dataset Group::write_strings(std::string_view name, std::span<const std::string> values) const {
  SilenceErrors quiet;
  DatatypeHandle type(H5Tcopy(H5T_C_S1));
  if (!type || H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    fail("H5Tcopy/H5Tset_size(string dataset " + std::string(name) + ")");
  }
  const hsize_t dims[1] = {values.size()};
  Dataset d = create_dataset_raw(name, std::span<const hsize_t>(dims), type.get());
  if (values.empty()) return d;
  std::vector<const char*> pointers(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) pointers[i] = values[i].c_str();
  if (H5Dwrite(d.id(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()) < 0) d.fail("H5Dwrite (strings)");
  return d;
}

// ---------------------------------------------------------------------------------------------
// File

File::File(std::shared_ptr<const std::string> name, FileHandle handle, std::unique_ptr<OutputPath> output)
    : Group(name, "/", GroupHandle{}), output_(std::move(output)), file_handle_(std::move(handle)) {
  SilenceErrors quiet;
  handle_ = GroupHandle(H5Gopen2(file_handle_.get(), "/", H5P_DEFAULT));
  if (!handle_) hdf5::fail(*name, "/", "H5Gopen2 (root group)");
  id_ = handle_.get();
}

File::~File() {
  // Close the root group and the file before OutputPath removes an uncommitted temporary.
  handle_.reset();
  file_handle_.reset();
}

File File::open(const std::filesystem::path& path) {
  SilenceErrors quiet;
  auto name = std::make_shared<const std::string>(path.string());
  check_input_path(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw DataError(*name + ": no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size == 0) throw DataError(*name + ": empty file (0 bytes), not an HDF5 file");
  const htri_t is_hdf5 = H5Fis_hdf5(name->c_str());
  if (is_hdf5 == 0) throw DataError(*name + ": not an HDF5 file (no HDF5 signature)");
  if (is_hdf5 < 0) hdf5::fail(*name, "", "H5Fis_hdf5 (cannot read the file)");
  // Through the heap guard: a corrupted global heap is a DataError, not a hang (docs/fuzzing.md).
  PropertyListHandle fapl(guarded_read_access());
  if (!fapl) hdf5::fail(*name, "", "H5Pcreate (file access)");
  FileHandle f(H5Fopen(name->c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f) {
    const std::string stack = take_error_stack();
    const bool truncated = stack.find("truncated") != std::string::npos;
    throw DataError(*name + ": " +
                    (truncated ? "truncated HDF5 file (shorter than its superblock says)"
                               : "cannot open as HDF5 (corrupted file?)") +
                    ": H5Fopen failed (HDF5: " + stack + ")");
  }
  note_input(path);
  return File(name, std::move(f), nullptr);
}

File File::open_image(std::span<const std::byte> image, const std::string& name) {
  SilenceErrors quiet;
  auto shared_name = std::make_shared<const std::string>(name);
  if (image.empty()) throw DataError(name + ": empty file (0 bytes), not an HDF5 file");
  PropertyListHandle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<std::byte*>(image.data()), image.size()) < 0) {
    hdf5::fail(name, "", "H5Pset_fapl_core/H5Pset_file_image");
  }
  FileHandle f(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f) hdf5::fail(name, "", "H5Fopen (file image)");
  return File(shared_name, std::move(f), nullptr);
}

File File::create(const std::filesystem::path& path) {
  SilenceErrors quiet;
  auto output = std::make_unique<OutputPath>(path);
  detail::first_close_failure().clear();  // a reader's, before this file: not this file's
  auto name = std::make_shared<const std::string>(path.string());
  FileHandle f(H5Fcreate(output->temporary_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f) hdf5::fail(*name, "", "H5Fcreate (create " + output->temporary_path().string() + ")");
  return File(name, std::move(f), std::move(output));
}

void File::commit() {
  SilenceErrors quiet;
  if (!output_) throw DataError(*file_ + ": commit() on a file opened for reading");
  if (file_handle_.valid() && H5Fflush(file_handle_.get(), H5F_SCOPE_GLOBAL) < 0) hdf5::fail(*file_, "", "H5Fflush");
  handle_.reset();
  if (file_handle_.close() < 0) hdf5::fail(*file_, "", "H5Fclose");
  if (std::string failure = std::exchange(detail::first_close_failure(), {}); !failure.empty()) {
    throw DataError(*file_ + ": write failed: " + failure);
  }
  output_->commit();
  output_.reset();
}

}  // namespace fp4sim::hdf5
