// weft — congestion-free collectives on spine-leaf fabrics. The CLI front end:
// one file per subcommand in this folder.
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "path_source.h"
#include "weft/probe/db_path_table.h"

namespace {

// A command line CLI11 refuses, on one line as every other error of weft
// (weft::cli::fail), with where to look; CLI11's own exit code. A first word
// that names no command, an option before any command (only --help and
// --version go there) or no word at all is said to be what it is, with the
// commands: CLI11 would answer "A subcommand is required" to all three.
int parse_error(CLI::App& app, const CLI::ParseError& e, const std::string& first) {
  std::vector<std::string> commands;
  const CLI::App* given = nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_group().empty()) commands.push_back(sub->get_name());
    if (sub->get_name() == first) given = sub;
  }
  std::string msg;
  if (!first.empty() && first[0] != '-' && given == nullptr) {
    msg = fmt::format("unknown command '{}' ({})", first, fmt::join(commands, ", "));
  } else if (first.empty()) {
    msg = fmt::format("no command given ({}; weft --help explains them)", fmt::join(commands, ", "));
  } else if (first[0] == '-') {
    msg = fmt::format("unknown option '{}': a command comes first ({}; weft --help explains them)", first,
                      fmt::join(commands, ", "));
  } else {
    std::string help = "weft";
    for (const CLI::App* sub = given; sub != nullptr;) {
      help += " " + sub->get_name();
      const auto parsed = sub->get_subcommands();
      sub = parsed.empty() ? nullptr : parsed.front();
    }
    msg = fmt::format("{} ({} --help lists the options)", e.what(), help);
  }
  weft::cli::fail(weft::invalid_argument(msg));
  return e.get_exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "weft: make AI-training fabrics congestion-free.\n"
      "Model a fabric, rank a job's hosts so collectives stay inside leaves, check\n"
      "the link load of every collective step, and write rank files for launchers.\n"
      "Start with:  weft demo      (probe, rank, route and AllReduce on an emulated fabric; as root)\n"
      "Then:        weft topo gen clos --spines 4 --leaves 4 --hosts 4 -o fabric.json\n"
      "             weft rank --topology fabric.json --all --format csv -o ranks.csv\n"
      "             weft check --topology fabric.json --ranks ranks.csv\n",
      "weft"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "weft 0.1.0");
  // `--paths fabric.db`: measured paths from a probe campaign (probe stage).
  weft::cli::set_db_path_table_factory([](const weft::topo::Fabric& f, const std::string& path) {
    return weft::probe::open_db_path_table(f, path);
  });
  weft::cli::Registry reg;
  weft::cli::register_topo(app, reg);
  weft::cli::register_rank(app, reg);
  weft::cli::register_check(app, reg);
  weft::cli::register_route(app, reg);
  weft::cli::register_sim(app, reg);
  weft::cli::register_demo(app, reg);
  weft::cli::register_agent(app, reg);
  weft::cli::register_probe(app, reg);
  weft::cli::register_watch(app, reg);
  weft::cli::register_bench(app, reg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version: checked as any command's output
      std::ostringstream out;
      app.exit(e, out, std::cerr);
      if (auto st = weft::cli::emit("", out.str()); !st.is_ok()) return weft::cli::fail(st);
      return weft::cli::finish_stdout(0);
    }
    return parse_error(app, e, argc > 1 ? argv[1] : "");
  }
  if (!reg.run) return weft::cli::fail(weft::internal_error("no command ran"));
  int rc = 1;
  try {
    rc = reg.run();
  } catch (const std::system_error& e) {
    // fmt::print throws when its write fails (more than a buffer's worth
    // onto a full disk): one error line, not std::terminate's abort.
    rc = weft::cli::fail(std::ferror(stdout) ? weft::io_error("writing standard output", e.code().value())
                                             : weft::Status(weft::StatusCode::kIo, e.what()));
  } catch (const std::exception& e) {
    rc = weft::cli::fail(weft::internal_error(fmt::format("unexpected: {}", e.what())));
  }
  return weft::cli::finish_stdout(rc);
}
