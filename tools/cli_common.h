// Shared helpers of the weft CLI: error reporting, sizes, output files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "weft/common/status.h"
#include "weft/routing/schedule.h"
#include "weft/topology/fabric.h"

namespace weft::cli {

// Prints "weft: error: <message>" on one line to stderr and returns 1.
int fail(const Status& st);
// What main returns: `rc`, or 1 with one error line when standard output
// could not be written (flushed here; fmt::print only buffers).
int finish_stdout(int rc);

// "4", "4K", "64MiB", "1G" -> bytes (K/M/G are powers of 1024).
std::optional<uint64_t> parse_size(std::string_view s);
std::string format_bytes(double bytes);

// Writes text to `path`, or to stdout when path is "" or "-"; atomic for files.
Status emit(const std::string& path, std::string_view text);
// Whether emit(path, ...) could create its file: a temporary file beside
// `path` is created and removed, as emit's atomic write does it. A command
// that runs for minutes calls this before it starts, so that a typo in an
// output path costs a second, not the run. "" and "-" (stdout) are fine.
Status check_output_path(std::string_view flag, const std::string& path);

// --collective's value, or one line naming the collectives weft plans.
Result<routing::Collective> collective_option(std::string_view s);

// --channels and --qps of nccl-ring (empty = not given).
void add_nccl_ring_options(CLI::App& cmd, std::optional<int>& channels, std::optional<int>& qps);
// nccl-ring's shape from them (1 where not given); other collectives refuse
// them, naming the option.
Result<routing::NcclRingShape> nccl_ring_shape(std::string_view collective, std::optional<int> channels,
                                               std::optional<int> qps);

// The NICs of `alloc` whose access link is down: no route reaches them
// (routing/paths.h check_access_link).
std::vector<int> access_down_nics(const topo::Fabric& f, const std::vector<int>& alloc);
// "host:nic (to 'leaf')" for the first four of `nics`, then ", ..." if there are more.
std::string describe_access(const topo::Fabric& f, const std::vector<int>& nics);

// Every subcommand registers itself here; `run` is set to the chosen command.
struct Registry {
  std::function<int()> run;
};

void register_topo(CLI::App& app, Registry& reg);
void register_rank(CLI::App& app, Registry& reg);
void register_check(CLI::App& app, Registry& reg);
void register_demo(CLI::App& app, Registry& reg);
void register_route(CLI::App& app, Registry& reg);
void register_sim(CLI::App& app, Registry& reg);
void register_agent(CLI::App& app, Registry& reg);
void register_probe(CLI::App& app, Registry& reg);
void register_watch(CLI::App& app, Registry& reg);
void register_bench(CLI::App& app, Registry& reg);

}  // namespace weft::cli
