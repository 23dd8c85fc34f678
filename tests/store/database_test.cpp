#include "store/database.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

namespace yonder::store {
namespace {

using namespace std::string_literals;

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/yonder_store_test_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Database open_or_die(const std::string& path) {
  Result<Database> db = Database::open(path);
  if (!db.ok()) {
    ADD_FAILURE() << db.error().to_string();
    std::abort();
  }
  return std::move(db).value();
}

std::string query_text(Database& db, std::string_view sql) {
  Result<Statement> stmt = db.prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.error().to_string();
  Result<bool> row = stmt->step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return stmt->column_text(0);
}

int64_t count_rows(Database& db, const std::string& table) {
  Result<Statement> stmt = db.prepare("SELECT count(*) FROM " + table);
  EXPECT_TRUE(stmt.ok()) << stmt.error().to_string();
  EXPECT_TRUE(*stmt->step());
  return stmt->column_int64(0);
}

unsigned file_mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(Database, OpenCreatesPrivateFileInWalMode) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  Database db = open_or_die(path);

  EXPECT_EQ(file_mode(path), 0600u);
  EXPECT_EQ(query_text(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_text(db, "PRAGMA synchronous"), "2");  // FULL
  EXPECT_EQ(query_text(db, "PRAGMA foreign_keys"), "1");
  EXPECT_NE(query_text(db, "PRAGMA busy_timeout"), "0");

  // SQLite creates the WAL on the first write and should copy our mode.
  ASSERT_TRUE(db.exec("CREATE TABLE t (x INTEGER)").ok());
  EXPECT_EQ(file_mode(path + "-wal"), 0600u);
  EXPECT_EQ(db.path(), path);
}

TEST(Database, ReopenKeepsCommittedRows) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    Database db = open_or_die(path);
    ASSERT_TRUE(db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (7);").ok());
    Database moved = std::move(db);  // the handle travels with the move
    ASSERT_TRUE(moved.exec("INSERT INTO t VALUES (8)").ok());
  }
  Database db = open_or_die(path);
  EXPECT_EQ(query_text(db, "SELECT group_concat(x) FROM t"), "7,8");
}

TEST(Database, BindsAndReadsEveryType) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(db.exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n BLOB, small INTEGER)").ok());

  const Bytes blob = {0x00, 0x01, 0x00, 0xff, 0x00};
  const std::string text = "caf\xc3\xa9\0tail"s;  // UTF-8 with a NUL inside
  {
    Result<Statement> insert = db.prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    ASSERT_TRUE(insert.ok()) << insert.error().to_string();
    ASSERT_TRUE(insert->bind(1, std::numeric_limits<int64_t>::min()).ok());
    ASSERT_TRUE(insert->bind(2, -2.5).ok());
    ASSERT_TRUE(insert->bind(3, std::string_view(text)).ok());
    ASSERT_TRUE(insert->bind(4, ByteView(blob)).ok());
    ASSERT_TRUE(insert->bind(5, nullptr).ok());
    ASSERT_TRUE(insert->bind(6, 42).ok());  // int, through the integral overload
    Result<bool> row = insert->step();
    ASSERT_TRUE(row.ok()) << row.error().to_string();
    EXPECT_FALSE(*row);

    // Same statement again: empty text and blob stay empty values, not NULL;
    // optionals bind NULL or their value.
    insert->reset();
    ASSERT_TRUE(insert->bind(1, std::optional<int64_t>()).ok());
    ASSERT_TRUE(insert->bind(2, std::optional<double>(0.125)).ok());
    ASSERT_TRUE(insert->bind(3, std::string_view()).ok());
    ASSERT_TRUE(insert->bind(4, ByteView()).ok());
    ASSERT_TRUE(insert->bind(5, ByteView(blob).subspan(0, 1)).ok());
    ASSERT_TRUE(insert->bind(6, std::optional<std::string>("x")).ok());
    ASSERT_TRUE(insert->step().ok());
    EXPECT_EQ(db.changes(), 1);
    EXPECT_EQ(db.last_insert_rowid(), 2);
  }

  Result<Statement> select =
      db.prepare("SELECT i, d, s, b, n, small, typeof(s), typeof(b) FROM t ORDER BY rowid");
  ASSERT_TRUE(select.ok());
  EXPECT_EQ(select->column_count(), 8);
  ASSERT_TRUE(*select->step());
  EXPECT_EQ(select->column_int64(0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(select->column_double(1), -2.5);
  EXPECT_EQ(select->column_text(2), text);
  EXPECT_EQ(select->column_text(2).size(), 10u);
  EXPECT_EQ(select->column_blob(3), blob);
  EXPECT_TRUE(select->column_is_null(4));
  EXPECT_EQ(select->column_optional_int64(4), std::nullopt);
  EXPECT_EQ(select->column_optional_int64(5), 42);
  EXPECT_FALSE(select->column_is_null(5));

  ASSERT_TRUE(*select->step());
  EXPECT_TRUE(select->column_is_null(0));
  EXPECT_EQ(select->column_double(1), 0.125);
  EXPECT_EQ(select->column_optional_text(2), std::optional<std::string>(""));
  EXPECT_EQ(select->column_text(6), "text");
  EXPECT_EQ(select->column_blob(3), Bytes{});
  EXPECT_EQ(select->column_text(7), "blob");
  EXPECT_EQ(select->column_blob(4), Bytes{0x00});
  EXPECT_EQ(select->column_text(5), "x");

  Result<bool> done = select->step();
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
}

TEST(Database, BadParameterIndexIsAnError) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  Result<Statement> stmt = db.prepare("SELECT ?1");
  ASSERT_TRUE(stmt.ok());
  Status status = stmt->bind(2, int64_t{1});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kInternal);
  EXPECT_NE(status.error().to_string().find("parameter 2"), std::string::npos);
}

TEST(Database, SqlMistakesAreInternalErrorsNamingTheStatement) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  Status status = db.exec("SELEC 1");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kInternal);
  EXPECT_NE(status.error().to_string().find("SELEC 1"), std::string::npos);
  EXPECT_NE(status.error().message().find("syntax error"), std::string::npos);

  Result<Statement> two = db.prepare("SELECT 1; SELECT 2");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().code(), ErrorCode::kInternal);
  EXPECT_TRUE(db.prepare("SELECT 1;  \n").ok());
}

TEST(Database, TransactionCommitsOrRollsBack) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(db.exec("CREATE TABLE t (x INTEGER PRIMARY KEY)").ok());

  ASSERT_TRUE(db.transaction([&] { return db.exec("INSERT INTO t VALUES (1)"); }).ok());
  EXPECT_EQ(count_rows(db, "t"), 1);

  // fn fails after a successful write: the write is undone.
  Status failed = db.transaction([&]() -> Status {
    YONDER_TRY(db.exec("INSERT INTO t VALUES (2)"));
    return make_error(ErrorCode::kInvalidArgument, "changed my mind");
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message(), "changed my mind");
  EXPECT_EQ(count_rows(db, "t"), 1);

  // A failing statement inside: both inserts are undone.
  Status duplicate = db.transaction([&]() -> Status {
    YONDER_TRY(db.exec("INSERT INTO t VALUES (3)"));
    return db.exec("INSERT INTO t VALUES (1)");
  });
  ASSERT_FALSE(duplicate.ok());
  EXPECT_EQ(duplicate.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(count_rows(db, "t"), 1);

  // An exception unwinding through transaction() rolls back too.
  EXPECT_THROW((void)db.transaction([&]() -> Status {
    EXPECT_TRUE(db.exec("INSERT INTO t VALUES (4)").ok());
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(count_rows(db, "t"), 1);

  // The RAII form: dropped without commit means rolled back.
  {
    Result<Transaction> tx = db.begin_transaction();
    ASSERT_TRUE(tx.ok()) << tx.error().to_string();
    ASSERT_TRUE(db.exec("INSERT INTO t VALUES (5)").ok());
  }
  EXPECT_EQ(count_rows(db, "t"), 1);
  {
    Result<Transaction> tx = db.begin_transaction();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(db.exec("INSERT INTO t VALUES (6)").ok());
    ASSERT_TRUE(tx->commit().ok());
    EXPECT_FALSE(tx->commit().ok());  // only once
  }
  EXPECT_EQ(count_rows(db, "t"), 2);

  // And the connection is usable afterwards: no transaction left open.
  ASSERT_TRUE(db.exec("BEGIN; COMMIT;").ok());
}

TEST(Database, ConstraintViolationsAreClearErrors) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(db.exec("CREATE TABLE parent (id TEXT PRIMARY KEY NOT NULL);"
                      "CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, n INTEGER NOT NULL CHECK (n >= 0),"
                      "  p TEXT REFERENCES parent(id));"
                      "INSERT INTO t VALUES ('a', 1, NULL);")
                  .ok());

  Status duplicate = db.exec("INSERT INTO t VALUES ('a', 2, NULL)");
  ASSERT_FALSE(duplicate.ok());
  EXPECT_EQ(duplicate.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(duplicate.error().message().find("UNIQUE constraint failed: t.id"), std::string::npos)
      << duplicate.error().message();

  Status negative = db.exec("INSERT INTO t VALUES ('b', -1, NULL)");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(negative.error().message().find("CHECK constraint failed"), std::string::npos);

  Status missing = db.exec("INSERT INTO t (id) VALUES ('c')");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.error().message().find("NOT NULL constraint failed: t.n"), std::string::npos);

  // foreign_keys=ON is in force.
  Status orphan = db.exec("INSERT INTO t VALUES ('d', 1, 'nobody')");
  ASSERT_FALSE(orphan.ok());
  EXPECT_EQ(orphan.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(orphan.error().message().find("FOREIGN KEY constraint failed"), std::string::npos);
}

TEST(Database, GarbageFileIsDataLossNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << "this is not a database, just some text\n";
  }
  Result<Database> db = Database::open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(db.error().message().find(path), std::string::npos) << db.error().message();
  EXPECT_NE(db.error().message().find("backup"), std::string::npos);
}

TEST(Database, FullDatabaseIsResourceExhaustedNamingTheFolder) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(db.exec("CREATE TABLE t (b BLOB)").ok());
  // max_page_count gives the same SQLITE_FULL as a full disk, without one.
  ASSERT_TRUE(db.exec("PRAGMA max_page_count = 8").ok());
  Status status = db.exec("INSERT INTO t VALUES (zeroblob(100000))");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(status.error().message().find("disk full: free space in " + dir.path()), std::string::npos)
      << status.error().message();
}

TEST(Database, LockHeldByAnotherConnectionIsUnavailable) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  Database first = open_or_die(path);
  Database second = open_or_die(path);
  second.set_busy_timeout(std::chrono::milliseconds(0));

  Result<Transaction> held = first.begin_transaction();
  ASSERT_TRUE(held.ok());
  Result<Transaction> blocked = second.begin_transaction();
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.error().code(), ErrorCode::kUnavailable);
  EXPECT_NE(blocked.error().message().find("only one yonder daemon"), std::string::npos);
}

TEST(Database, MissingFolderIsNotFound) {
  TempDir dir;
  Result<Database> db = Database::open(dir.file("no/such/state.db"));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(db.error().message().find(dir.file("no/such")), std::string::npos);
}

}  // namespace
}  // namespace yonder::store
