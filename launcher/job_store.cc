#include "launcher/job_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "launcher/local_job.h"
#include "runtime/store/tcp_store.h"

namespace weft::launcher {

namespace {
// "<prefix>gone/<rank>": "gone/" at the start or after a '/', then only digits. (Not std::regex:
// GCC 12 warns inside libstdc++'s regex at -O1, the sanitizer builds' level.)
bool is_gone_key(const std::string& key) {
  const size_t at = key.rfind("gone/");
  if (at == std::string::npos || (at > 0 && key[at - 1] != '/') || at + 5 == key.size()) return false;
  return std::all_of(key.begin() + static_cast<std::ptrdiff_t>(at + 5), key.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}
}  // namespace

JobStore::JobStore(const std::string& host, bool report)
    : secret_(generate_job_secret()), server_(std::make_unique<TcpStoreServer>(secret_, host, 0)) {
  // Every communicator arms a marker "<prefix>gone/<rank>" that the server sets to "died: rank R
  // (pid P on H) died" when the rank's connection closes; a process has one per communicator, so
  // one report per "(pid P on H)".
  server_->set_notice_hook([this, report](const std::string& key, const Bytes& value) {
    const std::string v = to_string(value);
    if (!is_gone_key(key) || v.rfind("died: ", 0) != 0) return;
    std::string who = v.substr(6);
    if (who.size() > 5 && who.compare(who.size() - 5, 5, " died") == 0) who.resize(who.size() - 5);
    const size_t open = who.find("(pid ");
    std::lock_guard<std::mutex> lock(mu_);
    if (!seen_.insert(open == std::string::npos ? who : who.substr(open)).second) return;
    deaths_.push_back(who);
    if (report) {
      const std::string line = "weftrun: " + who + " died (its connection to weftrun's store closed); the other ranks keep running "
                               "(--keep-going)\n";
      ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
      (void)rc;
    }
  });
}

JobStore::~JobStore() { server_.reset(); }  // its thread (and the hook) end before the members it uses

int JobStore::port() const { return server_->port(); }

std::vector<std::string> JobStore::deaths() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deaths_;
}

}  // namespace weft::launcher
