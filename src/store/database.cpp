#include "store/database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <filesystem>
#include <system_error>

namespace yonder::store {
namespace {

// SQLITE_TRANSIENT is a C cast of -1 to a function pointer; spelled out so
// the warning for old-style casts stays on. It tells SQLite to copy.
const sqlite3_destructor_type kCopyValue = reinterpret_cast<sqlite3_destructor_type>(intptr_t{-1});

std::string parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

std::string db_path(sqlite3* db) {
  const char* name = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  return name != nullptr && *name != '\0' ? name : "the database";
}

// SQL shortened to one line for error contexts.
std::string sql_excerpt(std::string_view sql) {
  constexpr size_t kMaxChars = 60;
  std::string out;
  bool space = false;
  for (char c : sql) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() >= kMaxChars) return "\"" + out + "...\"";
  }
  return "\"" + out + "\"";
}

// Turns a failed SQLite call into an Error whose message names the file and
// the way out. Must be called before any other call on `db`, which would
// replace its error message.
Error sqlite_error(sqlite3* db, int rc) {
  std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  // The OS error is only fresh for errors that came from the OS.
  const int sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  if ((primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR) && sys_errno != 0) {
    detail += ": " + std::generic_category().message(sys_errno);
  }
  const std::string path = db_path(db);
  const std::string dir = parent_dir(path);
  switch (primary) {
    case SQLITE_FULL:
      return make_error(ErrorCode::kResourceExhausted,
                        "disk full: free space in " + dir + " (writing " + path + ": " + detail + ")");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return make_error(ErrorCode::kDataLoss,
                        path + " is not a valid yonder database or is corrupt (" + detail +
                            "); stop yonder, move the file aside and restore the state folder "
                            "from a backup");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return make_error(ErrorCode::kUnavailable,
                        path + " is locked by another connection (" + detail +
                            "); make sure only one yonder daemon uses this state folder, then retry");
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return make_error(ErrorCode::kAlreadyExists, "a row with this key already exists (" + detail + ")");
      }
      if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
        return make_error(ErrorCode::kFailedPrecondition,
                          "a row it refers to is missing or still referenced (" + detail + ")");
      }
      return make_error(ErrorCode::kInvalidArgument, "value breaks a schema rule (" + detail + ")");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return make_error(ErrorCode::kPermissionDenied,
                        "cannot write " + path + " (" + detail + "); check that it and " + dir +
                            " belong to the user running yonder");
    case SQLITE_CANTOPEN:
      return make_error(ErrorCode::kUnavailable, "cannot open " + path + " (" + detail + "); check that " +
                                                     dir + " exists and is writable by this user");
    case SQLITE_IOERR:
      return make_error(ErrorCode::kUnavailable,
                        "I/O error on " + path + " (" + detail + "); check the disk holding " + dir);
    case SQLITE_NOMEM:
    case SQLITE_TOOBIG:
      return make_error(ErrorCode::kResourceExhausted, "SQLite ran out of room (" + detail + ")");
    default:
      // Syntax errors, misuse, bad parameter indexes: bugs in our SQL.
      return make_error(ErrorCode::kInternal,
                        "SQLite error on " + path + ": " + detail + " (code " + std::to_string(rc) + ")");
  }
}

Error errno_error(int err, const std::string& path) {
  const std::string detail = std::generic_category().message(err);
  const std::string dir = parent_dir(path);
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return make_error(ErrorCode::kPermissionDenied, "cannot create " + path + " (" + detail +
                                                          "); check that " + dir + " is writable by this user");
    case ENOENT:
    case ENOTDIR:
      return make_error(ErrorCode::kNotFound,
                        "cannot create " + path + " (" + detail + "); create the folder " + dir + " first");
    case ENOSPC:
    case EDQUOT:
      return make_error(ErrorCode::kResourceExhausted, "disk full: free space in " + dir);
    default:
      return make_error(ErrorCode::kUnavailable, "cannot create " + path + " (" + detail + ")");
  }
}

// SQLite would create a missing file with mode 0644; the store holds key
// material and link secrets' hashes, so create it ourselves first.
Status create_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return ok_status();  // SQLite checks what it is
    return errno_error(errno, path);
  }
  // The umask can only have narrowed 0600; set it exactly so the mode does
  // not depend on who started the daemon.
  const int chmod_rc = ::fchmod(fd, 0600);
  const int chmod_errno = errno;
  ::close(fd);
  if (chmod_rc != 0) return errno_error(chmod_errno, path);
  return ok_status();
}

Result<bool> step_stmt(sqlite3_stmt* stmt) {
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqlite_error(sqlite3_db_handle(stmt), rc).with_context("running " + sql_excerpt(sqlite3_sql(stmt)));
}

Status exec_on(sqlite3* db, std::string_view sql) {
  if (sql.size() > static_cast<size_t>(INT_MAX)) {
    return make_error(ErrorCode::kInvalidArgument, "SQL text is too long");
  }
  const char* next = sql.data();
  const char* end = sql.data() + sql.size();
  while (next < end) {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    const int rc = sqlite3_prepare_v2(db, next, static_cast<int>(end - next), &stmt, &tail);
    if (rc != SQLITE_OK) {
      return sqlite_error(db, rc).with_context("preparing " + sql_excerpt(std::string_view(next, end)));
    }
    if (stmt == nullptr) break;  // only whitespace or comments were left
    next = tail;
    Result<bool> row = step_stmt(stmt);
    while (row.ok() && *row) row = step_stmt(stmt);
    sqlite3_finalize(stmt);
    if (!row.ok()) return std::move(row).error();
  }
  return ok_status();
}

Result<std::string> query_text(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db, rc).with_context("preparing " + sql_excerpt(sql));
  Result<bool> row = step_stmt(stmt);
  std::string text;
  if (row.ok() && *row) {
    const unsigned char* p = sqlite3_column_text(stmt, 0);
    if (p != nullptr) text = reinterpret_cast<const char*>(p);
  }
  sqlite3_finalize(stmt);
  if (!row.ok()) return std::move(row).error();
  return text;
}

}  // namespace

// --- Statement ---

Statement::Statement(Statement&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

namespace {
Status bind_status(sqlite3_stmt* stmt, int rc, int index) {
  if (rc == SQLITE_OK) return ok_status();
  return sqlite_error(sqlite3_db_handle(stmt), rc)
      .with_context("binding parameter " + std::to_string(index) + " of " + sql_excerpt(sqlite3_sql(stmt)));
}
}  // namespace

Status Statement::bind(int index, int64_t value) {
  return bind_status(stmt_, sqlite3_bind_int64(stmt_, index, value), index);
}

Status Statement::bind(int index, double value) {
  return bind_status(stmt_, sqlite3_bind_double(stmt_, index, value), index);
}

Status Statement::bind(int index, std::string_view value) {
  // A null data pointer would bind NULL instead of ''.
  const char* data = value.empty() ? "" : value.data();
  return bind_status(stmt_, sqlite3_bind_text64(stmt_, index, data, value.size(), kCopyValue, SQLITE_UTF8),
                     index);
}

Status Statement::bind(int index, ByteView value) {
  if (value.empty()) {
    // As for text: sqlite3_bind_blob with a null pointer binds NULL.
    return bind_status(stmt_, sqlite3_bind_zeroblob(stmt_, index, 0), index);
  }
  return bind_status(stmt_, sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), kCopyValue), index);
}

Status Statement::bind(int index, std::nullptr_t) {
  return bind_status(stmt_, sqlite3_bind_null(stmt_, index), index);
}

Result<bool> Statement::step() { return step_stmt(stmt_); }

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::column_count() const { return sqlite3_column_count(stmt_); }

bool Statement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  // Text first, then bytes: the documented order that avoids a conversion
  // invalidating the pointer.
  const unsigned char* data = sqlite3_column_text(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
}

Bytes Statement::column_blob(int column) const {
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) return {};
  return Bytes(data, data + size);
}

std::optional<int64_t> Statement::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

std::optional<std::string> Statement::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

// --- Transaction ---

Transaction::~Transaction() {
  // SQLite itself rolls back after some errors (SQLITE_FULL, SQLITE_IOERR);
  // only roll back what is still open. A failing ROLLBACK leaves nothing we
  // could do here; SQLite rolls back on close or on the next open.
  if (db_ != nullptr && sqlite3_get_autocommit(db_) == 0) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

Status Transaction::commit() {
  if (db_ == nullptr) {
    return make_error(ErrorCode::kFailedPrecondition, "transaction was already committed");
  }
  if (sqlite3_get_autocommit(db_) != 0) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "transaction was rolled back by an earlier error; nothing was saved");
  }
  Status status = exec_on(db_, "COMMIT");
  if (status.ok()) db_ = nullptr;
  return status;
}

// --- Database ---

void Database::Closer::operator()(sqlite3* db) const {
  // _v2: a Statement that outlived us keeps the handle alive rather than
  // making close fail and leak it.
  sqlite3_close_v2(db);
}

Database::~Database() = default;

Result<Database> Database::open(const std::string& path) {
  const std::string context = "opening database " + path;
  Status created = create_private_file(path);
  if (!created.ok()) return std::move(created).error().with_context(context);

  sqlite3* raw = nullptr;
  // No SQLITE_OPEN_CREATE: the file exists now, and if it vanished SQLite
  // must not recreate it with its default mode.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Database db(raw, path);  // owns the handle even when open failed
  if (rc != SQLITE_OK) return sqlite_error(raw, rc).with_context(context);

  db.set_busy_timeout(kDefaultBusyTimeout);
  // This is the first read of the file, so a file that is not a database
  // fails here with SQLITE_NOTADB.
  Result<std::string> mode = query_text(raw, "PRAGMA journal_mode=WAL");
  if (!mode.ok()) return std::move(mode).error().with_context(context);
  if (*mode != "wal") {
    return make_error(ErrorCode::kFailedPrecondition,
                      "could not turn on write-ahead logging for " + path + " (journal mode stays '" + *mode +
                          "'); keep the state folder on a local file system")
        .with_context(context);
  }
  Status pragmas = exec_on(raw, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
  if (!pragmas.ok()) return std::move(pragmas).error().with_context(context);
  // Reads the whole schema, so a damaged one is reported now rather than on
  // some later query.
  Result<std::string> tables = query_text(raw, "SELECT count(*) FROM sqlite_schema");
  if (!tables.ok()) return std::move(tables).error().with_context(context);
  return db;
}

Status Database::exec(std::string_view sql) { return exec_on(db_.get(), sql); }

Result<Statement> Database::prepare(std::string_view sql) {
  if (sql.size() > static_cast<size_t>(INT_MAX)) {
    return make_error(ErrorCode::kInvalidArgument, "SQL text is too long");
  }
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, &tail);
  if (rc != SQLITE_OK) return sqlite_error(db_.get(), rc).with_context("preparing " + sql_excerpt(sql));
  Statement stmt(raw);
  if (raw == nullptr) {
    return make_error(ErrorCode::kInternal, "no SQL statement in " + sql_excerpt(sql));
  }
  const std::string_view rest(tail, static_cast<size_t>(sql.data() + sql.size() - tail));
  if (rest.find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    return make_error(ErrorCode::kInternal,
                      "prepare takes one statement; use exec for " + sql_excerpt(sql));
  }
  return stmt;
}

Result<Transaction> Database::begin_transaction() {
  Status status = exec_on(db_.get(), "BEGIN IMMEDIATE");
  if (!status.ok()) return std::move(status).error().with_context("starting a transaction");
  return Transaction(db_.get());
}

void Database::set_busy_timeout(std::chrono::milliseconds timeout) {
  sqlite3_busy_timeout(db_.get(), static_cast<int>(timeout.count()));
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

int64_t Database::changes() const { return sqlite3_changes64(db_.get()); }

}  // namespace yonder::store
