// Rendezvous key-value stores: how ranks find each other before any
// transport is up (Gloo's rendezvous/{file,tcp}_store, torchrun's TCPStore).
//
//   auto store = weft::coll::FileStore::open("/shared/dir/job42");
//   store->set("weft/tcp/3", address);
//   auto peer = store->get("weft/tcp/5", deadline);   // blocks until set
//
// Keys are written once; get() waits for the key or the deadline. Values are
// opaque bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "weft/common/status.h"

namespace weft::coll {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // set(), giving up at the deadline where the store can tell it is stuck
  // (TcpStore: a rendezvous host that stopped answering); the library calls
  // this one with its setup deadline. By default set(), which has none.
  virtual Status set_by(const std::string& key, const std::string& value,
                        std::chrono::steady_clock::time_point deadline) {
    (void)deadline;
    return set(key, value);
  }
  // Waits until the key exists; kDeadlineExceeded names the key.
  virtual Result<std::string> get(const std::string& key,
                                  std::chrono::steady_clock::time_point deadline) = 0;
  // This process's IPv4 address on its way to the rendezvous, "" when the
  // store cannot tell (files): the network the job was started on, where
  // the TCP transport listens by default (TcpOptions::listen_address).
  virtual std::string local_address() const { return ""; }
};

// In-process store: ranks that are threads of one process (tests, loopback).
class MemoryStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;
  // The ranks are threads of this process: loopback reaches them all.
  std::string local_address() const override { return "127.0.0.1"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
};

// One file per key in a directory every rank can read (a shared file system
// or, on one host, /tmp). Writes are atomic (temporary file + rename), so a
// reader never sees half a value. Nothing is ever removed: a job needs a
// directory (or a store prefix) no earlier job has written, or it reads that
// job's keys as its own.
class FileStore final : public Store {
 public:
  static Result<std::unique_ptr<FileStore>> open(const std::string& dir);
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

// torchrun-style TCP store: one process serves it (rank 0, an event loop on
// a background thread serving every client at once); every rank, the
// server's included, is a client.
//
// Listening address: the host the store is opened at (MASTER_ADDR on rank
// 0), so the port is reachable only where MASTER_ADDR is; WEFT_STORE_BIND
// (TcpStoreOptions::bind_address) overrides it, e.g. 0.0.0.0 where
// MASTER_ADDR is a name or address that rank 0's host does not own. A host
// name (torchrun users often pass one) is resolved to its first IPv4
// address (getaddrinfo(3)) by every rank alike. A name other than localhost
// that rank 0's own host maps to a loopback address (Debian's and Ubuntu's
// 127.0.1.1 in /etc/hosts) is served on every address (0.0.0.0, as
// PyTorch's TCPStore), with one log line: the other hosts reach it at the
// address their resolver gives.
//
// Secret: with WEFT_STORE_SECRET (the secret itself) or
// WEFT_STORE_SECRET_FILE (a file only its owner may read; a trailing newline
// is dropped), at least 16 bytes, server and clients prove to each other that
// they know it (HMAC-SHA256 challenge-response, RFC 2104); a client without
// it, with another one, or with one where the server has none is refused
// with a message and counted (TcpStoreCounters::refused). Without a secret,
// anyone who can reach the port can read and rewrite the keys.
//
// Limits (TcpStoreLimits, checked by client and server): keys of at most
// 1 KiB, values of at most 1 MiB, 512 MiB held in all (each key is charged
// 64 bytes more, for its bookkeeping). An oversize request is answered with
// an error naming the size and the limit and is skipped; the connection and
// the store go on serving. A connection that sends anything else than the
// protocol below is dropped and counted (garbage), as is one that has not
// finished its handshake within 10 s (timed_out); neither affects any other
// client.
//
// Protocol (integers are little-endian u32 unless said otherwise):
//   client hello   magic "WST1" (0x31545357), version (1), flags (bit 0:
//                  the client has a secret), 32-byte nonce Nc      = 44 bytes
//   server         reply (below) whose payload is flags (bit 0: the server
//                  has a secret) and a 32-byte nonce Ns; or an error reply,
//                  and the connection closes
//   client proof   HMAC(secret, "weft-store client" Ns Nc) (zeros without
//                  a secret)                                        = 32 bytes
//   server         a reply whose payload is HMAC(secret, "weft-store server"
//                  Nc Ns) (zeros without a secret), which the client checks;
//                  or an error reply, and the connection closes
//   request        op (1 = set, 2 = get), key length, value length (0 for
//                  get), key, value; one at a time per connection
//   reply          status (0 = ok, 1 = error), length, payload (the value of
//                  a get, nothing for a set, the message of an error); a get
//                  is answered when its key has been set
// Later sets of a key replace its value, as in the other stores.
//
// A client sends one request at a time: a get holds its connection until
// the key is set, so threads that wait for keys at once (communicators
// created concurrently in one process) each need a TcpStore of their own.
// A request that fails, a get past its deadline included, closes the
// connection (a late reply would answer the next request): that TcpStore's
// later calls fail at once, and a new one is opened to go on.
struct TcpStoreLimits {
  size_t max_key_bytes = 1 << 10;
  size_t max_value_bytes = 1 << 20;
  size_t max_total_bytes = size_t{512} << 20;
  size_t max_clients = 1 << 16;  // further connections are closed at once (over_capacity)
  std::chrono::milliseconds handshake_timeout{10000};
};

struct TcpStoreOptions {
  std::string bind_address;  // "" = the host the store is opened at
  std::string secret;        // "" = no authentication
  TcpStoreLimits limits;
};

// What the server turned away, for tests and diagnostics (zeros on a client).
struct TcpStoreCounters {
  uint64_t accepted = 0;       // connections
  uint64_t garbage = 0;        // dropped: not the protocol
  uint64_t refused = 0;        // dropped: secret missing or wrong
  uint64_t timed_out = 0;      // dropped: handshake not finished in time
  uint64_t over_capacity = 0;  // closed at once: max_clients reached
  uint64_t oversize = 0;       // requests answered with an error: key or value over the limit
  uint64_t full = 0;           // sets answered with an error: max_total_bytes reached
};

class TcpStore final : public Store {
 public:
  // serve: this process listens on port (rank 0); port 0 picks a free one
  // (port() says which). A port this process serves already (a TcpStore
  // opened to serve it is still open: two communicators on one store at
  // once) is shared, not bound again, if the secrets agree. Clients retry
  // connecting until the deadline.
  static Result<std::unique_ptr<TcpStore>> open(const std::string& host, uint16_t port, bool serve,
                                                std::chrono::steady_clock::time_point deadline,
                                                const TcpStoreOptions& options = {});
  ~TcpStore() override;
  // Without a deadline: 60 s.
  Status set(const std::string& key, const std::string& value) override;
  Status set_by(const std::string& key, const std::string& value,
                std::chrono::steady_clock::time_point deadline) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;
  // getsockname(2) of the client connection; "" (unknown) when the store's
  // host is a name other than localhost that this host maps to loopback
  // (see above): the other hosts reach this one over the network, which the
  // loopback route does not name.
  std::string local_address() const override;
  uint16_t port() const { return port_; }
  TcpStoreCounters counters() const;

  class Server;

 private:
  TcpStore() = default;
  Status handshake(const std::string& where, std::chrono::steady_clock::time_point deadline);
  Result<std::string> exchange(const std::string& request, const std::string& what,
                               std::chrono::steady_clock::time_point deadline);
  std::shared_ptr<Server> server_;  // shared by the stores this process opens to serve one port
  TcpStoreOptions options_;
  uint16_t port_ = 0;
  int fd_ = -1;
  bool named_loopback_ = false;  // the host is a name this host maps to loopback
  std::mutex mu_;  // one request at a time on the client connection
};

// The TCP store's options from the environment: WEFT_STORE_BIND,
// WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE (not both).
Result<TcpStoreOptions> tcp_store_options_from_env();

// Rank, size and rendezvous as a launcher hands them over, read from the
// environment in this order (first match wins):
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK
//   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// The store: WEFT_STORE ("tcp://host:port" or "file:/shared/dir"), else
// MASTER_ADDR + MASTER_PORT (a TCP store served by rank 0) — except under
// torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True), which holds
// that port itself: then WEFT_STORE is required. WEFT_LISTEN_ADDR
// and WEFT_SOCKET_IFNAME (TcpOptions::listen_address) are checked here too:
// one that names nothing on this host fails before any store is opened.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = -1;
  std::string launcher;  // "torchrun", "openmpi", "slurm"
  std::string store;     // "tcp://host:port" or "file:/dir"
};
Result<LaunchInfo> launch_info_from_env();

// Opens the store a LaunchInfo::store names; rank 0 serves a TCP store,
// with tcp_store_options_from_env().
Result<std::unique_ptr<Store>> open_store(const std::string& spec, int rank,
                                          std::chrono::steady_clock::time_point deadline);

}  // namespace weft::coll
