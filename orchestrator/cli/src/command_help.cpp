#include "command_help.hpp"

#include <sstream>

namespace orch::cli {

namespace {

constexpr std::size_t help_columns = 100;

// `text`'s paragraphs (split at newlines), each ended by a newline, with their words wrapped at
// `columns`.
std::string wrapped(const std::string& text, std::size_t columns) {
  std::string out;
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    std::istringstream words(paragraph);
    std::size_t column = 0;
    for (std::string word; words >> word;) {
      if (column > 0 && column + 1 + word.size() > columns) {
        out += '\n';
        column = 0;
      } else if (column > 0) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
    }
    out += '\n';
  }
  return out;
}

}  // namespace

std::string command_help::make_subcommand(const CLI::App* sub) const {
  const std::string& description = sub->get_description();
  std::ostringstream out;
  CLI::detail::format_help(out, sub->get_display_name(true),
                           description.substr(0, description.find('\n')), column_width_);
  return out.str();
}

std::string command_help::make_description(const CLI::App* app) const {
  const std::string& description = app->get_description();
  if (description.empty()) return {};
  return wrapped(description, help_columns) + '\n';  // a blank line before the usage
}

std::string command_help::make_option_desc(const CLI::Option* opt) const {
  // Beside the option's column; format_help indents each line after the first to it.
  std::string text = wrapped(opt->get_description(), help_columns - column_width_);
  if (!text.empty()) text.pop_back();
  return text;
}

std::shared_ptr<command_help> make_command_help() {
  return std::make_shared<command_help>();
}

CLI::App* add_command(CLI::App& app, const std::string& name, const std::string& summary,
                      const std::string& about) {
  return app.add_subcommand(name, summary + "\n\n" + about);
}

}  // namespace orch::cli
