// The migration files compiled into the binary: a table generated at build
// time by embed_migrations.cmake from migrations/sql/. Read it through
// EmbeddedMigrations() (migration.h), not directly.
//
// Thread-safety: immutable data.
#ifndef METRICS_MIGRATIONS_EMBEDDED_FILES_H_
#define METRICS_MIGRATIONS_EMBEDDED_FILES_H_

namespace metrics::migrations_internal {

struct EmbeddedFile {
  const char* file_name;
  const char* contents;
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const int kEmbeddedFileCount;

}  // namespace metrics::migrations_internal

#endif  // METRICS_MIGRATIONS_EMBEDDED_FILES_H_
