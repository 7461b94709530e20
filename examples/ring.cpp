// ring: a token travels around the ranks several times with MPI_Send/MPI_Recv;
// each hop adds the sender's rank + 1. Rank 0 checks the total after every lap.
#include <mpi.h>

#include <cstdlib>
#include <iostream>
#include <vector>

namespace {

// Initialises MPI for the lifetime of main and finalizes on every exit path.
class Session {
 public:
  Session(int *argc, char ***argv) { MPI_Init(argc, argv); }
  ~Session() { MPI_Finalize(); }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
};

int comm_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int comm_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  Session session(&argc, &argv);
  const int rank = comm_rank();
  const int size = comm_size();
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  const int laps = 3;
  const long per_lap = static_cast<long>(size) * (size + 1) / 2;  // sum of (r + 1)
  std::vector<long> seen;
  long token = 0;

  for (int lap = 0; lap < laps; ++lap) {
    if (size == 1) {
      // A blocking send to oneself before the receive may not complete.
      long out = token + 1;
      MPI_Sendrecv(&out, 1, MPI_LONG, 0, lap, &token, 1, MPI_LONG, 0, lap, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    } else if (rank == 0) {
      long out = token + 1;
      MPI_Send(&out, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      long out = token + rank + 1;
      MPI_Send(&out, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
    }
    if (rank == 0) seen.push_back(token);
  }

  int failed = 0;
  if (rank == 0) {
    for (int lap = 0; lap < laps; ++lap) {
      const long expect = per_lap * (lap + 1);
      const bool ok = seen[static_cast<std::size_t>(lap)] == expect;
      std::cout << "ring: lap " << lap << " token " << seen[static_cast<std::size_t>(lap)]
                << (ok ? " ok" : " WRONG") << " (expected " << expect << ")\n";
      if (!ok) failed = 1;
    }
    std::cout << "ring: " << size << " ranks, " << laps << " laps, "
              << (failed ? "FAILED" : "token intact") << std::endl;
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
