#include "hdf5_heap_guard.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

// HDF5 1.10's H5HG__cache_heap_deserialize walks a global heap collection's objects with
// `p = begin + need`, where `need` for the free-space object (index 0) is that object's own size field,
// unchecked: a size of 0 never moves `p`, and H5Aread of any variable-length string in the collection
// (every string attribute h5py writes, `@schema` first) never returns. HDF5 gives no call that yields the
// collection's address before it parses it, so the guard sits below HDF5, in the file driver: a read
// whose bytes are a whole collection is walked the same way first, and refused if a step would not move.
// 1.10 hands global heap reads to the driver as raw data (H5FD_MEM_DRAW), so the collection's signature,
// not the memory type, selects them. The driver class's layout is 1.10's (1.12 and later add fields).
#if H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10

namespace fp4sim::hdf5 {

namespace {

struct GuardedFile {
  H5FD_t pub;  // first: HDF5 passes this struct as its H5FD_t
  int fd;
  dev_t device;
  ino_t inode;
  haddr_t eoa;
  haddr_t eof;
};

constexpr haddr_t kMaxAddress = (static_cast<haddr_t>(1) << 62) - 1;

std::uint64_t little_endian(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Where HDF5's walk of the collection in `block` would stop moving, or an empty string. Sizes of lengths
// are taken as 8 bytes (HDF5's and h5py's default superblock). A block that is not a whole collection
// (the first, speculative 4 KiB read of a larger one) is left for the read of the whole.
std::string stalled_collection(const unsigned char* block, std::size_t size) {
  constexpr std::size_t kHeader = 16, kObjectHeader = 16;  // "GCOL", version, 3 reserved, 8-byte size
  if (size < kHeader || std::memcmp(block, "GCOL", 4) != 0 || block[4] != 1) return {};
  const std::uint64_t end = little_endian(block + 8, 8);
  if (end > size) return {};
  for (std::uint64_t at = kHeader; at < end && end - at >= kObjectHeader;) {
    const unsigned index = static_cast<unsigned>(little_endian(block + at, 2));
    const std::uint64_t object_size = little_endian(block + at + 8, 8);
    const std::uint64_t need = index > 0 ? kObjectHeader + ((object_size + 7) & ~std::uint64_t{7}) : object_size;
    // 0 never moves; past 2^62 the pointer sum can wrap (and no collection is that large).
    if (need == 0 || need > (std::uint64_t{1} << 62)) {
      return "global heap collection: object " + std::to_string(index) + " at offset " + std::to_string(at) +
             " has size " + std::to_string(object_size) + ", which HDF5 1.10 would walk forever (corrupted file)";
    }
    at += need;
  }
  return {};
}

herr_t refuse(H5E_major_t major, H5E_minor_t minor, const std::string& why) {
  H5Epush2(H5E_DEFAULT, __FILE__, "fp4sim_guarded_read", __LINE__, H5E_ERR_CLS, major, minor, "%s", why.c_str());
  return -1;
}

H5FD_t* open_file(const char* name, unsigned flags, hid_t, haddr_t) {
  if ((flags & (H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC)) != 0) {
    refuse(H5E_VFL, H5E_CANTOPENFILE, "the guarded driver reads only");
    return nullptr;
  }
  const int fd = ::open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    refuse(H5E_FILE, H5E_CANTOPENFILE, std::string("error message = '") + std::strerror(errno) + "'");
    return nullptr;
  }
  struct stat st {};
  auto* f = static_cast<GuardedFile*>(std::calloc(1, sizeof(GuardedFile)));
  if (::fstat(fd, &st) != 0 || f == nullptr) {
    std::free(f);
    ::close(fd);
    refuse(H5E_FILE, H5E_CANTOPENFILE, "cannot stat the file");
    return nullptr;
  }
  f->fd = fd;
  f->device = st.st_dev;
  f->inode = st.st_ino;
  f->eof = static_cast<haddr_t>(st.st_size);
  return &f->pub;
}

GuardedFile* of(const H5FD_t* file) { return reinterpret_cast<GuardedFile*>(const_cast<H5FD_t*>(file)); }

herr_t close_file(H5FD_t* file) {
  const int status = ::close(of(file)->fd);
  std::free(of(file));
  return status == 0 ? 0 : -1;
}

int compare(const H5FD_t* a, const H5FD_t* b) {
  const GuardedFile *x = of(a), *y = of(b);
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->inode != y->inode) return x->inode < y->inode ? -1 : 1;
  return 0;
}

herr_t query(const H5FD_t*, unsigned long* flags) {
  // sec2's reading features. Metadata accumulation merges reads of metadata only: a global heap read is
  // raw data to the driver, so it still reaches read() whole, as HDF5 asked for it.
  *flags = H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE | H5FD_FEAT_AGGREGATE_METADATA |
           H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

haddr_t get_eoa(const H5FD_t* file, H5FD_mem_t) { return of(file)->eoa; }
herr_t set_eoa(H5FD_t* file, H5FD_mem_t, haddr_t address) {
  of(file)->eoa = address;
  return 0;
}
haddr_t get_eof(const H5FD_t* file, H5FD_mem_t) { return of(file)->eof; }

herr_t get_handle(H5FD_t* file, hid_t, void** handle) {
  *handle = &of(file)->fd;
  return 0;
}

herr_t read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t address, std::size_t size, void* buffer) {
  GuardedFile* f = of(file);
  if (address > kMaxAddress || size > kMaxAddress - address || address + size > f->eoa) {
    return refuse(H5E_IO, H5E_OVERFLOW, "read past the end of the allocated space");
  }
  auto* out = static_cast<unsigned char*>(buffer);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(f->fd, out + done, size - done, static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(H5E_IO, H5E_READERROR, std::string("error message = '") + std::strerror(errno) + "'");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::memset(out + done, 0, size - done);  // past the end of the file reads as zeros (as sec2's does)
  const std::string stalled = stalled_collection(out, size);
  return stalled.empty() ? 0 : refuse(H5E_HEAP, H5E_BADVALUE, stalled);
}

herr_t write(H5FD_t*, H5FD_mem_t, hid_t, haddr_t, std::size_t, const void*) {
  return refuse(H5E_VFL, H5E_WRITEERROR, "the guarded driver reads only");
}

hid_t driver() {
  static const hid_t id = [] {
    static H5FD_class_t cls{};
    cls.name = "fp4sim_guarded_read";
    cls.maxaddr = kMaxAddress;
    cls.fc_degree = H5F_CLOSE_WEAK;
    cls.open = open_file;
    cls.close = close_file;
    cls.cmp = compare;
    cls.query = query;
    cls.get_eoa = get_eoa;
    cls.set_eoa = set_eoa;
    cls.get_eof = get_eof;
    cls.get_handle = get_handle;
    cls.read = read;
    cls.write = write;
    const H5FD_mem_t map[] = H5FD_FLMAP_DICHOTOMY;
    std::memcpy(cls.fl_map, map, sizeof map);
    return H5FDregister(&cls);
  }();
  return id;
}

}  // namespace

hid_t guarded_read_access() {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return fapl;
  // Never silently unguarded: a driver that cannot be registered or set fails the open.
  if (driver() < 0 || H5Pset_driver(fapl, driver(), nullptr) < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

}  // namespace fp4sim::hdf5

#else

namespace fp4sim::hdf5 {
hid_t guarded_read_access() { return H5Pcreate(H5P_FILE_ACCESS); }
}  // namespace fp4sim::hdf5

#endif
