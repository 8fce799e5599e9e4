// Ranks through MPI (src/cli/ranks.hpp): MPI_COMM_WORLD; OpenMP threads inside a rank never call MPI.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "fp4sim/core/error.hpp"
#include "ranks.hpp"

namespace fp4sim::cli {

namespace {

// Messages travel in pieces an int count can hold.
constexpr std::size_t kPiece = std::size_t{1} << 30;

// Whether an MPI launcher started this process, by the variables each sets in its ranks' environment:
// OpenMPI's mpirun (OMPI_COMM_WORLD_SIZE), PMIx launchers (PMIX_RANK: OpenMPI 5, Slurm's srun --mpi=pmix),
// PMI and PMI-2 launchers (PMI_RANK: MPICH's Hydra, Intel MPI, MVAPICH, srun --mpi=pmi2). Started any
// other way the process is a world of one without MPI: MPI's singleton start forks OpenMPI's orted, about
// half a second of every plain run, and fails where no daemon can start.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace

Ranks& Ranks::world() {
  static Ranks ranks;
  return ranks;
}

Ranks::Ranks() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (!launched_by_mpi()) return;  // rank 0 of 1: run_on_ranks calls no collective
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &count_);
}

Ranks::~Ranks() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

std::pair<std::int64_t, int> Ranks::lowest(std::int64_t position) {
  struct {
    long value;
    int rank;
  } mine{static_cast<long>(position), rank_}, low{};
  static_assert(sizeof(long) == sizeof(std::int64_t));
  MPI_Allreduce(&mine, &low, 1, MPI_LONG_INT, MPI_MINLOC, MPI_COMM_WORLD);
  return {low.value, low.rank};
}

std::string Ranks::broadcast(std::string text, int root) {
  std::uint64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
  text.resize(size);
  for (std::size_t at = 0; at < size; at += kPiece) {
    MPI_Bcast(text.data() + at, static_cast<int>(std::min(kPiece, size - at)), MPI_CHAR, root, MPI_COMM_WORLD);
  }
  return text;
}

std::vector<std::string> Ranks::gather(std::string bytes) {
  const std::uint64_t size = bytes.size();
  std::vector<std::uint64_t> sizes(rank_ == 0 ? count_ : 0);
  MPI_Gather(&size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank_ != 0) {
    for (std::size_t at = 0; at < size; at += kPiece) {
      MPI_Send(bytes.data() + at, static_cast<int>(std::min(kPiece, size - at)), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
    return {};
  }
  std::vector<std::string> all(static_cast<std::size_t>(count_));
  all[0] = std::move(bytes);
  for (int r = 1; r < count_; ++r) {
    std::string& part = all[static_cast<std::size_t>(r)];
    part.resize(sizes[static_cast<std::size_t>(r)]);
    for (std::size_t at = 0; at < part.size(); at += kPiece) {
      MPI_Recv(part.data() + at, static_cast<int>(std::min(kPiece, part.size() - at)), MPI_CHAR, r, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    }
  }
  return all;
}

}  // namespace fp4sim::cli
