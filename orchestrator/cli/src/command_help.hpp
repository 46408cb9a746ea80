// command_help: how comfy-orch's help reads (docs/cli.md). `comfy-orch --help` lists each command
// on one line, its summary, as git, cargo and kubectl list theirs; `comfy-orch <command> --help`
// shows the summary and the paragraphs that explain the command, and its options, wrapped to 100
// columns. The top help had printed every command's whole paragraph, 15 lines of up to 580
// columns.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace orch::cli {

// Lists a subcommand by its description's first line, and wraps descriptions' paragraphs and
// options' descriptions.
class command_help : public CLI::Formatter {
 public:
  std::string make_subcommand(const CLI::App* sub) const override;
  std::string make_description(const CLI::App* app) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
};

// The formatter for the top app, set before any command is added (each inherits it).
std::shared_ptr<command_help> make_command_help();

// Adds command `name` to `app`: `summary` (one line, under 70 columns) is its line in
// `comfy-orch --help`, and `summary` then `about` its own --help's description.
CLI::App* add_command(CLI::App& app, const std::string& name, const std::string& summary,
                      const std::string& about);

}  // namespace orch::cli
