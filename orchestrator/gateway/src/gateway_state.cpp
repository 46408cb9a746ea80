#include "orch/gateway/gateway_state.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/errc.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::gateway {

using nlohmann::json;

namespace {

// What the meta table says of a file this code wrote; a newer format is refused, not guessed at.
constexpr const char* format_name = "comfy-orch gateway state";
constexpr int format_version = 1;

constexpr const char* schema = R"(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE prompts (
  prompt_id TEXT PRIMARY KEY, number REAL NOT NULL, sequence INTEGER NOT NULL,
  document TEXT NOT NULL, extra_data TEXT NOT NULL, outputs TEXT NOT NULL, bytes INTEGER NOT NULL,
  host TEXT, node_started INTEGER NOT NULL);
CREATE TABLE history (
  position INTEGER PRIMARY KEY AUTOINCREMENT, prompt_id TEXT NOT NULL UNIQUE,
  entry TEXT NOT NULL, bytes INTEGER NOT NULL);
)";

std::string dumped(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string what_to_do(const std::filesystem::path& file) {
  return "\n  fix: move " + file.string() +
         " away (the gateway then starts with an empty queue and history), or set [gateway] "
         "state_file in the fleet file to another path";
}

}  // namespace

// One prepared statement, finalised when it goes.
class gateway_state::statement {
 public:
  statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~statement() { sqlite3_finalize(s_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  bool prepared() const { return rc_ == SQLITE_OK; }
  statement& text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  statement& real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  statement& integer(int i, std::int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  statement& null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int step() { return prepared() ? sqlite3_step(s_) : rc_; }
  // Runs it to its end, then makes it ready to run again: true when it ran.
  bool run() {
    const int rc = step();
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return rc == SQLITE_DONE || rc == SQLITE_ROW;
  }
  std::string column_text(int i) const {
    const auto* p = sqlite3_column_text(s_, i);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(s_, i)));
  }
  bool column_null(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }
  double column_real(int i) const { return sqlite3_column_double(s_, i); }
  std::int64_t column_integer(int i) const { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

// BEGIN ... COMMIT, rolled back unless committed.
class gateway_state::transaction {
 public:
  explicit transaction(sqlite3* db) : db_(db) {
    began_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~transaction() {
    if (began_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  bool began() const { return began_; }
  bool commit() {
    committed_ = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
    return committed_;
  }

 private:
  sqlite3* db_;
  bool began_ = false;
  bool committed_ = false;
};

status gateway_state::failed(const std::string& doing) const {
  return error{gateway_errc::state_unusable, file_.string() + ": " + doing + ": " +
                                                 sqlite3_errmsg(db_) +
                                                 " (the change is not kept across a restart)"};
}

result<std::unique_ptr<gateway_state>> gateway_state::open(const std::filesystem::path& file) {
  const auto refuse = [&](const std::string& why, bool with_fix = true) -> error {
    return error{gateway_errc::state_unusable,
                 file.string() + ": " + why + (with_fix ? what_to_do(file) : std::string())};
  };
  // Created here, not by SQLite, so that it is never readable by others, not even for a moment
  // (SQLite's own journal files take the database's mode).
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return refuse(std::string("cannot be opened or created: ") + std::strerror(errno) +
                      "\n  fix: make its directory writable, or set [gateway] state_file to a "
                      "writable path",
                  false);
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return refuse("is not a regular file");

  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, nullptr);
  std::unique_ptr<gateway_state> state(new gateway_state(file, raw));
  if (rc != SQLITE_OK)
    return refuse(std::string("SQLite cannot open it: ") +
                  (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  sqlite3* db = state->db_;
  sqlite3_extended_result_codes(db, 1);
  // Held for as long as this gateway runs: a second gateway on the same file would give the
  // same prompts to the hosts twice. WAL in exclusive mode keeps its index in this process.
  const auto exec = [&](const char* sql) {
    return sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  };
  int step = exec("PRAGMA locking_mode=EXCLUSIVE");
  if (step == SQLITE_OK) step = exec("BEGIN EXCLUSIVE");
  if (step == SQLITE_OK) step = exec("COMMIT");
  if ((step & 0xff) == SQLITE_BUSY || (step & 0xff) == SQLITE_LOCKED)
    return refuse("another gateway (or program) holds it",
                  false) /* not moved away: it is someone's live state */;
  if ((step & 0xff) == SQLITE_NOTADB || (step & 0xff) == SQLITE_CORRUPT)
    return refuse("is not a SQLite database, or a damaged one (" + std::string(sqlite3_errmsg(db)) +
                  ")");
  if (step != SQLITE_OK) return refuse(std::string("cannot be read: ") + sqlite3_errmsg(db));
  if (exec("PRAGMA journal_mode=WAL") != SQLITE_OK || exec("PRAGMA synchronous=FULL") != SQLITE_OK)
    return refuse(std::string("cannot be set up: ") + sqlite3_errmsg(db));

  // Empty (just made, or a file of 0 bytes): the schema and a new id. Else it must be one of
  // ours, of a format this code reads.
  std::vector<std::string> tables;
  {
    statement list(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    int r = 0;
    while ((r = list.step()) == SQLITE_ROW) tables.push_back(list.column_text(0));
    if (r != SQLITE_DONE)
      return refuse("is not a SQLite database, or a damaged one (" +
                    std::string(sqlite3_errmsg(db)) + ")");
  }
  if (tables.empty()) {
    transaction t(db);
    bool made = t.began() && exec(schema) == SQLITE_OK;
    if (made) {
      statement meta(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)");
      made = meta.text(1, "format").text(2, format_name).run() &&
             meta.text(1, "version").text(2, std::to_string(format_version)).run() &&
             meta.text(1, "gateway_id").text(2, serve::uuid4()).run() &&
             meta.text(1, "counter").text(2, "0").run() && t.commit();
    }
    if (!made) return refuse(std::string("cannot be written: ") + sqlite3_errmsg(db), false);
    return state;
  }
  std::string format;
  std::string version;
  {
    statement meta(db, "SELECT key, value FROM meta WHERE key IN ('format', 'version')");
    while (meta.step() == SQLITE_ROW)
      (meta.column_text(0) == "format" ? format : version) = meta.column_text(1);
  }
  if (format != format_name) {
    std::string names;
    for (const auto& t : tables) names += (names.empty() ? "" : ", ") + t;
    return refuse(
        "is a SQLite database, but not a comfy-orch gateway's state (its tables: " + names + ")");
  }
  if (version != std::to_string(format_version))
    return refuse("is a gateway state of format " + version + "; this comfy-orch reads format " +
                      std::to_string(format_version) +
                      "\n  fix: run the comfy-orch that wrote it, or set [gateway] state_file to "
                      "another path",
                  false);
  return state;
}

gateway_state::~gateway_state() {
  sqlite3_close_v2(db_);
}

result<stored_state> gateway_state::load() {
  stored_state out;
  const auto unreadable = [&](const std::string& what) -> error {
    return error{gateway_errc::state_unusable,
                 file_.string() + ": " + what + " cannot be read" + what_to_do(file_)};
  };
  const auto parsed = [](const std::string& text) -> std::optional<json> {
    auto j = executor::parse_bounded_json(text);
    if (!j) return std::nullopt;
    return std::move(*j);
  };
  {
    statement meta(db_, "SELECT key, value FROM meta");
    int rc = 0;
    while ((rc = meta.step()) == SQLITE_ROW) {
      const std::string key = meta.column_text(0);
      if (key == "gateway_id") out.gateway_id = meta.column_text(1);
      if (key == "counter") {
        try {
          out.counter = std::stod(meta.column_text(1));
        } catch (const std::exception&) {
          return unreadable("its counter");
        }
      }
    }
    if (rc != SQLITE_DONE || out.gateway_id.empty()) return unreadable("its meta table");
  }
  {
    statement prompts(db_,
                      "SELECT prompt_id, number, sequence, document, extra_data, outputs, bytes, "
                      "host, node_started FROM prompts");
    int rc = 0;
    while ((rc = prompts.step()) == SQLITE_ROW) {
      stored_prompt p;
      p.prompt_id = prompts.column_text(0);
      p.number = prompts.column_real(1);
      p.sequence = static_cast<std::uint64_t>(prompts.column_integer(2));
      auto document = parsed(prompts.column_text(3));
      auto extra = parsed(prompts.column_text(4));
      auto outputs = parsed(prompts.column_text(5));
      if (!document || !document->is_object() || !extra || !extra->is_object() || !outputs ||
          !outputs->is_array())
        return unreadable("prompt " + p.prompt_id);
      p.document = std::move(*document);
      p.extra_data = std::move(*extra);
      for (const auto& o : *outputs)
        if (o.is_string()) p.outputs.push_back(o.get<std::string>());
      p.bytes = static_cast<std::size_t>(prompts.column_integer(6));
      if (!prompts.column_null(7)) p.host = prompts.column_text(7);
      p.node_started = prompts.column_integer(8) != 0;
      out.prompts.push_back(std::move(p));
    }
    if (rc != SQLITE_DONE) return unreadable("its prompts");
  }
  {
    statement history(db_, "SELECT prompt_id, entry, bytes FROM history ORDER BY position");
    int rc = 0;
    while ((rc = history.step()) == SQLITE_ROW) {
      stored_history h;
      h.prompt_id = history.column_text(0);
      auto entry = parsed(history.column_text(1));
      if (!entry || !entry->is_object()) return unreadable("history entry " + h.prompt_id);
      h.entry = std::move(*entry);
      h.bytes = static_cast<std::size_t>(history.column_integer(2));
      out.history.push_back(std::move(h));
    }
    if (rc != SQLITE_DONE) return unreadable("its history");
  }
  return out;
}

status gateway_state::put(const stored_prompt& p, double counter) {
  transaction t(db_);
  statement insert(db_,
                   "INSERT OR REPLACE INTO prompts (prompt_id, number, sequence, document, "
                   "extra_data, outputs, bytes, host, node_started) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  statement count(db_, "UPDATE meta SET value = ?1 WHERE key = 'counter'");
  insert.text(1, p.prompt_id)
      .real(2, p.number)
      .integer(3, static_cast<std::int64_t>(p.sequence))
      .text(4, dumped(p.document))
      .text(5, dumped(p.extra_data))
      .text(6, dumped(json(p.outputs)))
      .integer(7, static_cast<std::int64_t>(p.bytes))
      .integer(9, p.node_started ? 1 : 0);
  if (p.host)
    insert.text(8, *p.host);
  else
    insert.null(8);
  // The counter as text: a double's shortest round trip.
  if (t.began() && insert.run() && count.text(1, json(counter).dump()).run() && t.commit())
    return ok_status();
  return failed("prompt " + p.prompt_id + " could not be written");
}

status gateway_state::set_host(const std::string& prompt_id, const std::optional<std::string>& host,
                               bool node_started) {
  statement update(db_, "UPDATE prompts SET host = ?1, node_started = ?2 WHERE prompt_id = ?3");
  if (host)
    update.text(1, *host);
  else
    update.null(1);
  if (update.integer(2, node_started ? 1 : 0).text(3, prompt_id).run()) return ok_status();
  return failed("prompt " + prompt_id + " could not be updated");
}

status gateway_state::remove_prompts(const std::vector<std::string>& ids) {
  transaction t(db_);
  statement remove(db_, "DELETE FROM prompts WHERE prompt_id = ?1");
  bool ran = t.began();
  for (const auto& id : ids) ran = ran && remove.text(1, id).run();
  if (ran && t.commit()) return ok_status();
  return failed("prompts could not be removed");
}

status gateway_state::remove_pending() {
  statement remove(db_, "DELETE FROM prompts WHERE host IS NULL");
  if (remove.run()) return ok_status();
  return failed("the pending prompts could not be removed");
}

status gateway_state::finish(const std::string& prompt_id, const stored_history& entry,
                             const std::vector<std::string>& dropped) {
  transaction t(db_);
  statement remove(db_, "DELETE FROM prompts WHERE prompt_id = ?1");
  statement forget(db_, "DELETE FROM history WHERE prompt_id = ?1");
  statement insert(db_, "INSERT INTO history (prompt_id, entry, bytes) VALUES (?1, ?2, ?3)");
  bool ran = t.began() && remove.text(1, prompt_id).run() && forget.text(1, prompt_id).run();
  for (const auto& id : dropped) ran = ran && forget.text(1, id).run();
  if (!entry.prompt_id.empty())
    ran = ran && insert.text(1, entry.prompt_id)
                     .text(2, dumped(entry.entry))
                     .integer(3, static_cast<std::int64_t>(entry.bytes))
                     .run();
  if (ran && t.commit()) return ok_status();
  return failed("the history entry of prompt " + prompt_id + " could not be written");
}

status gateway_state::remove_history(const std::vector<std::string>& ids) {
  transaction t(db_);
  statement forget(db_, "DELETE FROM history WHERE prompt_id = ?1");
  bool ran = t.began();
  for (const auto& id : ids) ran = ran && forget.text(1, id).run();
  if (ran && t.commit()) return ok_status();
  return failed("history entries could not be removed");
}

status gateway_state::clear_history() {
  statement clear(db_, "DELETE FROM history");
  if (clear.run()) return ok_status();
  return failed("the history could not be cleared");
}

}  // namespace orch::gateway
