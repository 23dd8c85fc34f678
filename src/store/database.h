// A thin RAII layer over one SQLite connection: open with the pragmas the
// daemon's durability depends on, run SQL, bind and read values, and wrap
// writes in transactions. Every SQLite failure comes back as a yonder::Error
// whose message says what to do (free disk space, restore a backup, stop a
// second daemon), not just SQLite's code.
//
// Threading: a Database and everything made from it are used by one thread at
// a time, and that thread is a worker, never the event loop: every call here
// may block on the disk or on another process's lock (see README.md).
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/bytes.h"
#include "base/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace yonder::store {

// A prepared statement. Made by Database::prepare; must not outlive it.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are numbered from 1, as SQL's ?1 is. Text and blobs are
  // copied, so the arguments need not outlive the call. An empty blob or
  // string binds a zero-length value, never NULL.
  Status bind(int index, int64_t value);
  Status bind(int index, double value);
  Status bind(int index, std::string_view value);
  Status bind(int index, ByteView value);
  Status bind(int index, std::nullptr_t);
  // Other integer types would be ambiguous between int64_t and double.
  template <std::integral T>
  Status bind(int index, T value) {
    return bind(index, static_cast<int64_t>(value));
  }
  // Nullable columns: nullopt binds NULL.
  template <typename T>
  Status bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, nullptr);
  }

  // Runs the statement to its next row: true when a row is ready to read
  // with the column getters, false when the statement has finished.
  Result<bool> step();

  // Makes the statement ready to run again and clears its bindings. Any
  // error of the last step was already returned by step().
  void reset();

  // Columns of the current row, numbered from 0. Reading a NULL gives 0,
  // 0.0 or an empty string/blob; use column_is_null to tell them apart.
  int column_count() const;
  bool column_is_null(int column) const;
  int64_t column_int64(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  Bytes column_blob(int column) const;
  std::optional<int64_t> column_optional_int64(int column) const;
  std::optional<std::string> column_optional_text(int column) const;

 private:
  friend class Database;
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}

  sqlite3_stmt* stmt_ = nullptr;
};

// An open write transaction, begun with BEGIN IMMEDIATE so that the write
// lock is taken up front rather than on the first write (which in WAL mode
// can fail with SQLITE_BUSY without waiting). Rolls back when destroyed
// unless commit() succeeded. Must not outlive its Database.
class Transaction {
 public:
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // On failure the transaction stays open and is rolled back on destruction.
  Status commit();

 private:
  friend class Database;
  explicit Transaction(sqlite3* db) : db_(db) {}

  sqlite3* db_ = nullptr;
};

class Database {
 public:
  // How long a statement waits for another connection's lock before failing
  // with kUnavailable.
  static constexpr std::chrono::milliseconds kDefaultBusyTimeout{5000};

  // Opens (creating with mode 0600 if missing) the database file at `path`
  // and sets journal_mode=WAL, synchronous=FULL (a commit that returned is on
  // disk, so state can be acknowledged after it), foreign_keys=ON and the
  // busy timeout. The mode of an existing file is left alone; SQLite gives
  // the -wal and -shm files the main file's mode. A file that is not a
  // SQLite database gives kDataLoss.
  static Result<Database> open(const std::string& path);

  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;
  ~Database();

  // Runs one or more ';'-separated statements, discarding any rows.
  Status exec(std::string_view sql);

  // Compiles exactly one statement.
  Result<Statement> prepare(std::string_view sql);

  Result<Transaction> begin_transaction();

  // Runs fn (Status()) inside a transaction: commits if it returns ok,
  // rolls back if it returns an error or throws. Not reentrant.
  template <typename Fn>
  Status transaction(Fn&& fn) {
    Result<Transaction> tx = begin_transaction();
    if (!tx.ok()) return std::move(tx).error();
    Status status = std::forward<Fn>(fn)();
    if (!status.ok()) return status;  // ~Transaction rolls back
    return tx->commit();
  }

  void set_busy_timeout(std::chrono::milliseconds timeout);

  // The rowid of the last successful INSERT on this connection.
  int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;

  // The path as given to open().
  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };

  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
};

}  // namespace yonder::store
