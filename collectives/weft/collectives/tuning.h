// The constants of kAuto's cost model (docs/collectives.md "Selection"):
// per transport, what one step of an AllReduce costs. `weft bench
// --calibrate -o tuning.json` measures them on the machine it runs on; a
// communicator reads such a file from CommConfig::selection.tuning or from
// $WEFT_TUNING, else takes built_in_tuning() (collectives/tuning.cc says
// where those were measured).
//
//   auto t = weft::coll::load_tuning("tuning.json");  // errors name the file and the field
//   if (!t) return t.status();
//   cfg.selection.tuning = *t;
//
// The file (version 1):
//   {"version": 1,
//    "transports": {"tcp": {"alpha_us": 5.1, "beta_ns_per_byte": 0.21, "gamma_ns_per_byte": 0.09,
//                           "cache_bytes": 1048576, "beta_far_ns_per_byte": 0.4, "alpha_shared_us": 30,
//                           "hd_piece_bytes": 1048576},
//                   "shm": {...}},
//    "machine": "...", "measured": "...", "command": "...", "load": "...",  (optional, informational)
//    "samples": {...}}                                                       (optional: what was fitted)
// alpha_us, beta_ns_per_byte and gamma_ns_per_byte are required and > 0;
// cache_bytes and beta_far_ns_per_byte are optional (both or neither;
// beta_far >= beta), as are alpha_shared_us (>= alpha) and hd_piece_bytes
// (the built-in piece of that transport). A
// transport the file does not name keeps its built-in constants. Unknown
// fields and transports are errors: a misspelt name would otherwise be
// silently the built-in one.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/common/status.h"

namespace weft::coll {

// One transport in Hockney's model as Thakur, Rabenseifner & Gropp use it
// ("Optimization of Collective Communication Operations in MPICH", IJHPCA
// 2005, section 3): a step in which a rank sends and receives m bytes and
// reduces r of them costs alpha + m·beta + r·gamma. Messages larger than a
// core's cache cost more per byte (both sides copy them through memory):
// past cache_bytes, each further byte costs beta_far instead of beta.
struct TransportCost {
  double alpha_us = 0;           // α: a step of one small message each way between two ranks
  double beta_ns_per_byte = 0;   // β: each further byte of the step's message
  double gamma_ns_per_byte = 0;  // γ: each byte a rank reduces (f32 sum: reduce_into)
  size_t cache_bytes = 0;        // 0: beta at every size
  double beta_far_ns_per_byte = 0;  // each byte of a message past cache_bytes (>= beta)
  // α where a host runs more ranks than it has CPUs: a step waits for its
  // partner to be scheduled (measured with both ranks on one CPU). 0: alpha.
  double alpha_shared_us = 0;
  // The step's time for messages of m bytes: α + the bytes' time.
  double message_us(double m, bool shared_cpus = false) const {
    const double c = static_cast<double>(cache_bytes);
    const double ns = cache_bytes == 0 || m <= c ? m * beta_ns_per_byte : c * beta_ns_per_byte + (m - c) * beta_far_ns_per_byte;
    return (shared_cpus && alpha_shared_us > 0 ? alpha_shared_us : alpha_us) + ns * 1e-3;
  }
  // HD AllReduce over this transport runs in consecutive pieces of at most
  // this many bytes (0 = the whole vector; else >= kMinHdPieceBytes):
  // docs/collectives.md "Algorithms" (pieces.cc). Not fitted by --calibrate.
  size_t hd_piece_bytes = 0;
  bool operator==(const TransportCost&) const = default;
};

struct Tuning {
  static constexpr int kVersion = 1;
  // By transport name: "tcp", "shm", "verbs", "loopback" (known_transports()).
  std::map<std::string, TransportCost, std::less<>> transports;
  std::string source = "built-in";  // where the constants came from (a file's path), for messages
  // The transport's constants; a transport not named takes tcp's.
  const TransportCost& of(std::string_view transport) const;
  // Every transport known, its constants finite and > 0, a "tcp" entry;
  // errors name the source, the transport and the field.
  Status validate() const;
};

// The transports a tuning file may name (whether or not this build has them).
const std::vector<std::string>& known_transports();

// Measured on the machine this library was tuned on (collectives/tuning.cc
// has the command, the date and the load).
Tuning built_in_tuning();
// A version-1 tuning file's text; `name` (the file's path) starts every error.
Result<Tuning> parse_tuning(std::string_view json_text, std::string_view name);
Result<Tuning> load_tuning(const std::string& path);
// $WEFT_TUNING's file if the variable is set and not empty, else built_in_tuning().
Result<Tuning> tuning_from_env();

// What `weft bench --calibrate` measured on one transport between two ranks
// of this host: (bytes, µs) points, each the best of several batches.
struct CalibrationSamples {
  std::vector<std::pair<size_t, double>> exchange_us;  // one step: m bytes each way
  std::vector<std::pair<size_t, double>> reduce_us;    // one reduce_into (f32 sum) over m bytes
  double shared_us = 0;                                // one 8-byte step, both ranks on one CPU (0: not measured)
};
// α and β: the least-squares line through the exchange points up to
// kNearBytes; beta_far: the slope beyond, if steeper (cache_bytes =
// kNearBytes); γ: the slope of the line through the reduce points;
// alpha_shared: shared_us, if above α.
// hd_piece_bytes stays 0.
inline constexpr size_t kNearBytes = size_t{1} << 20;
Result<TransportCost> fit_transport_cost(const CalibrationSamples& s);

// A tuning file (version 1) with these constants, `info` (each field
// written if not empty) and the samples they were fitted from.
struct TuningInfo {
  std::string machine, measured, command, load;
};
std::string tuning_to_json(const Tuning& t, const TuningInfo& info = {},
                           const std::map<std::string, CalibrationSamples>& samples = {});

}  // namespace weft::coll
