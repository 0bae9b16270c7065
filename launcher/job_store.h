// The store weftrun serves for a job launched through MPI: outside the ranks, so that any rank,
// rank 0 included, may die and the others still meet there (weftCommShrink). Its disconnect
// notices tell weftrun which ranks died, since mpirun, asked to keep going, does not.
#pragma once
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace weft {
class TcpStoreServer;
}

namespace weft::launcher {

class JobStore {
 public:
  // Listens on host ("0.0.0.0": every interface) with a fresh secret. report: say each death as
  // it is noticed ("weftrun: rank 1 (pid 1234 on n1) died ...").
  JobStore(const std::string& host, bool report);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;
  int port() const;
  const std::string& secret() const { return secret_; }
  // The ranks whose notices said they died ("rank 1 (pid 1234 on n1)"), one per process, in order.
  std::vector<std::string> deaths() const;

 private:
  std::string secret_;
  std::unique_ptr<TcpStoreServer> server_;
  mutable std::mutex mu_;
  std::set<std::string> seen_;  // "(pid P on H)" of each process reported
  std::vector<std::string> deaths_;
};

}  // namespace weft::launcher
