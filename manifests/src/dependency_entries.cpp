#include "dependency_entries.hpp"

#include "orch/manifests/toml_source.hpp"

namespace orch::manifests::detail {
namespace {

constexpr std::size_t max_text = 1024;

// Whether `s` holds anything but printable ASCII: all a PEP 508 requirement (a version
// specifier, a marker, a URL) may contain. A whitelist, since pip splits a requirements file with
// str.splitlines(), on U+0085, U+2028 and U+2029 as on "\n": such a character would start a line
// pip obeys as an option (--index-url ...).
bool has_unprintable(std::string_view s) {
  for (const unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return true;
  return false;
}

// A distribution or conda package name (PEP 508: letters, digits, ".", "_", "-", starting and
// ending with a letter or digit).
bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  const auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (const char c : s)
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// A key: a name, with extras in brackets as packs write them ("trimesh[easy]").
bool is_key(std::string_view s) {
  const auto open = s.find('[');
  if (open == std::string_view::npos) return is_name(s);
  if (s.back() != ']' || !is_name(s.substr(0, open))) return false;
  std::string_view extras = s.substr(open + 1, s.size() - open - 2);
  while (true) {
    const auto comma = extras.find(',');
    std::string_view extra = extras.substr(0, comma);
    while (!extra.empty() && extra.front() == ' ') extra.remove_prefix(1);
    while (!extra.empty() && extra.back() == ' ') extra.remove_suffix(1);
    if (!is_name(extra)) return false;
    if (comma == std::string_view::npos) return true;
    extras.remove_prefix(comma + 1);
  }
}

// Why `text` cannot be a version specifier or a reference (rev, tag, branch, ...), or empty.
std::string text_problem(std::string_view text) {
  if (text.size() > max_text) return "is longer than " + std::to_string(max_text) + " characters";
  if (has_unprintable(text))
    return "holds a character other than printable ASCII (a newline, a Unicode line separator, "
           "...), which pip could read as the start of an option line";
  // Any word starting with "-" would reach pip or uv as an option.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool word_start = i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' ||
                            text[i - 1] == ',' || text[i - 1] == ';';
    if (word_start && text[i] == '-') return "has a word starting with '-' (an option to pip)";
  }
  return {};
}

std::string url_problem(std::string_view url) {
  if (const auto why = text_problem(url); !why.empty()) return why;
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos || scheme == 0) return "is not a URL (scheme://...)";
  for (const char c : url.substr(0, scheme)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '.' ||
                    (c >= '0' && c <= '9') || c == '-';
    if (!ok) return "is not a URL (scheme://...)";
  }
  if (url.find_first_of(" \t") != std::string_view::npos) return "holds a space";
  return {};
}

class checker {
 public:
  checker(std::string_view section, const std::string& file, const toml::table& table,
          diagnostics& diags)
      : section_(section), file_(file), table_(table), diags_(diags) {}

  void run() {
    for (const auto& [key, value] : table_) {
      const std::string name(key.str());
      const auto where = position_of(file_, value, &table_);
      const std::string label = std::string(section_) + "." + printable_key(name);
      if (!is_key(name)) {
        diags_.error(where, label,
                     "is not a package name (letters, digits, '.', '_', '-', starting and ending "
                     "with a letter or digit; extras in brackets: name[extra])",
                     "write the distribution's name as PyPI or conda-forge lists it");
        continue;
      }
      if (const auto text = value.value_exact<std::string>()) {
        refuse_if(where, label, text_problem(*text), "a version specifier such as \">=1.2,<2\"");
      } else if (const auto* spec = value.as_table()) {
        check_spec(*spec, label);
      } else {
        diags_.error(where, label, "expected a version string or a table, got " + describe(value),
                     "write a version specifier such as \">=1.2\", or a table "
                     "{ version = ..., git = ..., url = ..., path = ... }");
      }
    }
  }

 private:
  // Control characters in a key are shown escaped: the message reaches a terminal.
  static std::string printable_key(const std::string& key) {
    std::string out;
    for (const unsigned char c : key) {
      if (c < 0x20 || c == 0x7f) {
        static const char* hex = "0123456789abcdef";
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  void check_spec(const toml::table& spec, const std::string& label) {
    for (const auto& [k, v] : spec) {
      const std::string field(k.str());
      const auto where = position_of(file_, v, &spec);
      const std::string key = label + "." + printable_key(field);
      if (field == "extras") {
        const auto* extras = v.as_array();
        bool ok = extras != nullptr;
        if (extras != nullptr) {
          for (const auto& e : *extras) {
            const auto s = e.value_exact<std::string>();
            ok = ok && s && is_name(*s);
          }
        }
        if (!ok) {
          diags_.error(where, key, "expected a list of extra names such as [\"cuda\"]",
                       "write each extra as a name: letters, digits, '.', '_', '-'");
        }
      } else if (const auto text = v.value_exact<std::string>()) {
        const bool url = field == "url" || field == "git";
        refuse_if(where, key, url ? url_problem(*text) : text_problem(*text),
                  url ? "a URL such as \"https://github.com/owner/repo.git\""
                      : "the value as the package's documentation gives it");
      } else if (!v.is_boolean() && !v.is_integer()) {
        diags_.error(where, key, "expected a string, got " + describe(v),
                     "write the value as a string");
      }
    }
  }

  void refuse_if(const source_position& where, const std::string& key, const std::string& why,
                 const std::string& what) {
    if (why.empty()) return;
    diags_.error(where, key, "the value " + why + ": it would reach pip or uv as written",
                 "write " + what);
  }

  std::string_view section_;
  const std::string& file_;
  const toml::table& table_;
  diagnostics& diags_;
};

}  // namespace

void check_dependency_table(const toml::table& table, std::string_view section,
                            const std::string& file, diagnostics& diags) {
  checker(section, file, table, diags).run();
}

}  // namespace orch::manifests::detail
