// Replay throughput benchmark (issue 6): float32 bytes of tensor data per second per recipe, per-tensor
// statistics only (docs/design.md: the 200 MB/s target excludes GEMM-level error), on a generated trace of
// at least 1 GiB, with the peak RSS of each run.
//
//   build/bench/bench_replay [--gib G] [--dir DIR] [--gzip L] [--keep]
//
// Every configuration runs in a child process (fork), so the peak RSS reported (wait4's ru_maxrss) is
// that run's alone. Timing: one replay per configuration (each is ~1 GiB of work, many seconds; a
// repetition loop would add nothing but minutes); wall clock and CPU time are both printed, since the
// machine may be shared. A plain program rather than a Google Benchmark: one long run per configuration
// and per-run process isolation are the point.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/io/trace.hpp"

namespace fs = std::filesystem;

namespace {

// A cheap deterministic generator of roughly Gaussian values (sum of four uniforms), scaled per tensor.
void fill(std::vector<float>& v, std::uint64_t seed, float scale) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    const float s = static_cast<float>(z & 0xFFFF) + static_cast<float>((z >> 16) & 0xFFFF) +
                    static_cast<float>((z >> 32) & 0xFFFF) + static_cast<float>(z >> 48);
    v[i] = (s * (1.0f / 65536.0f) - 2.0f) * scale;
  }
}

struct Shape {
  std::size_t tokens, in, out;
};

// Steps x layers of [tokens, in] / [out, in] / [tokens, out] float32 tensors, written in row slabs so
// the generator holds one slab at a time.
std::uint64_t generate(const fs::path& path, double gib, int gzip) {
  const Shape shape{4096, 4096, 4096};  // 64 MiB per tensor
  const std::uint64_t per_layer = 4ull * (shape.tokens * shape.in + shape.out * shape.in + shape.tokens * shape.out);
  const int layers_total = static_cast<int>(std::ceil(gib * (1ull << 30) / per_layer));
  fp4sim::trace::WriterOptions wo;
  wo.model = "bench_replay synthetic";
  wo.gzip = gzip;
  wo.shuffle = gzip > 0;
  wo.chunk_rows = 64;
  fp4sim::trace::Writer w(path, wo);
  std::uint64_t bytes = 0;
  const int steps = 2;
  const int layers_per_step = (layers_total + steps - 1) / steps;
  std::vector<float> slab;
  for (int s = 0; s < steps; ++s) {
    for (int l = 0; l < layers_per_step; ++l) {
      const std::string layer = "model.layers." + std::to_string(l) + ".mlp.fc";
      const struct {
        const char* name;
        std::size_t rows, cols;
        float scale;
      } tensors[3] = {{"x", shape.tokens, shape.in, 1.0f + s},
                      {"w", shape.out, shape.in, 0.02f},
                      {"dy", shape.tokens, shape.out, 1e-5f * (1 + 3 * s)}};
      for (const auto& t : tensors) {
        fp4sim::hdf5::Dataset d = w.create_tensor(1 + 50 * s, layer, t.name, t.rows, t.cols);
        const std::size_t rows_per_slab = 512;
        for (std::size_t r = 0; r < t.rows; r += rows_per_slab) {
          const std::size_t n = std::min(rows_per_slab, t.rows - r);
          slab.resize(n * t.cols);
          fill(slab, (static_cast<std::uint64_t>(s) << 40) ^ (static_cast<std::uint64_t>(l) << 20) ^ r ^
                         static_cast<std::uint64_t>(t.name[0]),
               t.scale);
          d.write_rows<float>(r, n, slab);
        }
        bytes += 4ull * t.rows * t.cols;
      }
    }
  }
  w.commit();
  return bytes;
}

struct Measurement {
  double wall = 0, cpu = 0;
  std::uint64_t bytes = 0;
  long max_rss_kib = 0;
  bool ok = false;
};

// OpenMP threads a child will use: OMP_NUM_THREADS, else the online CPUs (this process starts no
// OpenMP runtime threads of its own).
int threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) return std::max(1, std::atoi(env));
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One configuration, run by the child process: prints "wall cpu bytes".
int run_child(const fs::path& trace, const std::string& recipes, std::size_t slab_bytes) {
  fp4sim::replay::Options o;
  std::size_t start = 0;
  while (start <= recipes.size()) {
    const std::size_t comma = recipes.find(',', start);
    const std::string name = recipes.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    o.recipes.push_back(*fp4sim::find_recipe(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  o.gemms = false;
  o.max_slab_bytes = slab_bytes;
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = fp4sim::replay::run(trace, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
  std::printf("%.6f %.6f %" PRIu64 "\n", wall, cpu, result.tensor_bytes);
  return 0;
}

// Runs one configuration in a fresh process (this executable with --child): libgomp's thread pool does
// not survive fork(), and a fresh process makes wait4's peak RSS that run's alone.
Measurement measure(const fs::path& trace, const std::string& recipes, std::size_t slab_bytes) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    const std::string slab = std::to_string(slab_bytes);
    execl("/proc/self/exe", "bench_replay", "--child", trace.c_str(), recipes.c_str(), slab.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {};
  std::size_t used = 0;
  ssize_t got = 0;
  while ((got = read(fds[0], buf + used, sizeof buf - 1 - used)) > 0) used += static_cast<std::size_t>(got);
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Measurement m;
  m.max_rss_kib = usage.ru_maxrss;
  if (used > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::sscanf(buf, "%lf %lf %" SCNu64, &m.wall, &m.cpu, &m.bytes);
    m.ok = true;
  }
  return m;
}

// The trace is generated in a child too, so this process never starts OpenMP threads before forking.
std::uint64_t generate_in_child(const fs::path& path, double gib, int gzip) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::uint64_t bytes = generate(path, gib, gzip);
    if (write(fds[1], &bytes, sizeof bytes) != sizeof bytes) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::uint64_t bytes = 0;
  if (read(fds[0], &bytes, sizeof bytes) != sizeof bytes) bytes = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? bytes : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--child") {
    return run_child(argv[2], argv[3], static_cast<std::size_t>(std::strtoull(argv[4], nullptr, 10)));
  }
  double gib = 1.0;
  fs::path dir = fs::temp_directory_path();
  int gzip = 0;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) {
      gib = std::atof(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--gzip" && i + 1 < argc) {
      gzip = std::atoi(argv[++i]);
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr, "usage: %s [--gib G] [--dir DIR] [--gzip LEVEL] [--keep]\n", argv[0]);
      return 2;
    }
  }
  const fs::path trace = dir / ("bench_replay_" + std::to_string(getpid()) + ".h5");
  std::printf("bench_replay: generating %.2f GiB trace %s (gzip %d) ...\n", gib, trace.c_str(), gzip);
  std::fflush(stdout);
  const auto g0 = std::chrono::steady_clock::now();
  const std::uint64_t bytes = generate_in_child(trace, gib, gzip);
  if (bytes == 0) {
    std::fprintf(stderr, "bench_replay: generating %s failed\n", trace.c_str());
    return 1;
  }
  const double gen = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
  std::printf("  %.3f GiB of float32 tensors (largest tensor 64 MiB), file %.3f GiB, written in %.1f s\n",
              bytes / double(1ull << 30), fs::file_size(trace) / double(1ull << 30), gen);
  std::printf("  machine: %d OpenMP threads, %ld online CPUs; per-tensor statistics only (no GEMMs)\n\n",
              threads(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-22s %9s %9s %11s %14s %14s %13s %s\n", "recipes", "slab MiB", "wall s", "trace MB/s",
              "per recipe MB/s", "per recipe cpu*", "peak RSS MiB", "target >= 200 MB/s per recipe");
  struct Config {
    std::vector<std::string> recipes;
    std::size_t slab;
  };
  const std::vector<Config> configs = {
      {{"ue5m3"}, 256u << 20},  {{"nvfp4"}, 256u << 20}, {{"mxfp4"}, 256u << 20},
      {{"ue5m3", "nvfp4", "mxfp4"}, 256u << 20}, {{"ue5m3"}, 16u << 20},
  };
  for (const auto& c : configs) {
    std::string names;
    for (const auto& r : c.recipes) names += (names.empty() ? "" : ",") + r;
    const Measurement m = measure(trace, names, c.slab);
    if (!m.ok) {
      std::printf("%-22s failed\n", names.c_str());
      continue;
    }
    // Per recipe: every recipe quantizes and measures every byte; n recipes in one run share its time.
    const double n = static_cast<double>(c.recipes.size());
    const double trace_mbs = m.bytes / 1e6 / m.wall;
    const double mbs = n * trace_mbs;
    const double mbs_cpu = n * m.bytes / 1e6 / (m.cpu / threads());
    std::printf("%-22s %9zu %9.2f %11.1f %14.1f %14.1f %13.1f %s\n", names.c_str(), c.slab >> 20, m.wall, trace_mbs,
                mbs, mbs_cpu, m.max_rss_kib / 1024.0, mbs >= 200.0 ? "met" : "missed");
    std::fflush(stdout);
  }
  std::printf("\n* per recipe cpu: recipes x bytes over (CPU seconds / threads), an estimate of the rate with the "
              "cores to itself:\n  serial parts (HDF5 reads) make an idle machine's wall rate lower, OpenMP threads "
              "spinning at barriers\n  on a loaded machine make this estimate lower. With OMP_NUM_THREADS=1 it is "
              "the clean per-core rate.\n");
  if (!keep) fs::remove(trace);
  return 0;
}
