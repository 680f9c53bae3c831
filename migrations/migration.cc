#include "migrations/migration.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace metrics::migrations {

namespace {

struct ParsedName {
  int version;
  std::string name;
  bool up;
};

// "0001_init.up.sql" -> {1, "init", true}.
absl::StatusOr<ParsedName> ParseFileName(absl::string_view file_name) {
  auto invalid = [file_name](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "migration file \"", file_name, "\": ", why,
        " (expected NNNN_name.up.sql or NNNN_name.down.sql)"));
  };
  ParsedName parsed;
  absl::string_view rest = file_name;
  if (absl::ConsumeSuffix(&rest, ".up.sql")) {
    parsed.up = true;
  } else if (absl::ConsumeSuffix(&rest, ".down.sql")) {
    parsed.up = false;
  } else {
    return invalid("not an .up.sql or .down.sql file");
  }
  size_t underscore = rest.find('_');
  if (underscore == absl::string_view::npos || underscore == 0 ||
      underscore + 1 == rest.size()) {
    return invalid("no version number and name");
  }
  absl::string_view digits = rest.substr(0, underscore);
  if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &parsed.version) || parsed.version <= 0) {
    return invalid("the version must be a positive number");
  }
  parsed.name = std::string(rest.substr(underscore + 1));
  return parsed;
}

constexpr absl::string_view kDirective = "-- migrate:";

bool IsHex64(absl::string_view text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// A line that is blank or only a comment: what may come before a first step.
bool IsCommentOrBlank(absl::string_view line) {
  absl::string_view stripped = absl::StripAsciiWhitespace(line);
  return stripped.empty() || absl::StartsWith(stripped, "--");
}

// Cuts an up file at its directive lines (migration.h lists them).
absl::Status ParseUpFile(absl::string_view file_name, Migration& migration) {
  std::vector<MigrationStep> steps;
  bool preamble_has_statement = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(migration.up_sql, '\n')) {
    ++line_number;
    auto invalid = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migration file \"", file_name, "\" line ", line_number, ": ", why));
    };
    if (!absl::StartsWith(line, kDirective)) {
      if (steps.empty()) {
        preamble_has_statement |= !IsCommentOrBlank(line);
      } else {
        absl::StrAppend(&steps.back().sql, line, "\n");
      }
      continue;
    }
    absl::string_view rest = line.substr(kDirective.size());
    const size_t space = rest.find(' ');
    const absl::string_view word = rest.substr(0, space);
    const absl::string_view argument = absl::StripAsciiWhitespace(
        space == absl::string_view::npos ? "" : rest.substr(space));
    if (word == "accepts-checksum") {
      if (!IsHex64(argument)) {
        return invalid("accepts-checksum takes a SHA-256 in 64 lower-case hex digits");
      }
      migration.accepted_checksums.emplace_back(argument);
      continue;
    }
    MigrationStep step;
    if (word == "step") {
      step.kind = MigrationStep::Kind::kTransaction;
    } else if (word == "step-outside-transaction") {
      step.kind = MigrationStep::Kind::kOutsideTransaction;
    } else if (word == "step-repeated") {
      step.kind = MigrationStep::Kind::kRepeated;
    } else {
      return invalid(absl::StrCat(
          "unknown directive \"", word,
          "\" (expected step, step-outside-transaction, step-repeated or "
          "accepts-checksum)"));
    }
    if (argument.empty()) return invalid("a step needs a description");
    if (steps.empty() && preamble_has_statement) {
      return invalid("statements come before the first step");
    }
    step.description = std::string(argument);
    steps.push_back(std::move(step));
  }
  if (steps.empty()) {
    MigrationStep whole;
    whole.sql = migration.up_sql;
    steps.push_back(std::move(whole));
  }
  migration.up_steps = std::move(steps);
  return absl::OkStatus();
}

}  // namespace

std::string MigrationLabel(int version, absl::string_view name) {
  return absl::StrCat(absl::Dec(version, absl::kZeroPad4), "_", name);
}

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

absl::StatusOr<std::vector<Migration>> BuildMigrations(
    std::vector<MigrationFile> files) {
  struct Pair {
    Migration migration;
    std::string up_file;
    std::string down_file;
  };
  std::map<int, Pair> by_version;
  for (MigrationFile& file : files) {
    absl::StatusOr<ParsedName> parsed = ParseFileName(file.file_name);
    if (!parsed.ok()) return parsed.status();
    Pair& pair = by_version[parsed->version];
    std::string& seen = parsed->up ? pair.up_file : pair.down_file;
    if (!seen.empty() ||
        (!pair.migration.name.empty() && pair.migration.name != parsed->name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migration file \"", file.file_name, "\": version ", parsed->version,
          " is used by another file too"));
    }
    if (!parsed->up) {
      int line_number = 0;
      for (absl::string_view line : absl::StrSplit(file.contents, '\n')) {
        ++line_number;
        if (absl::StartsWith(line, kDirective)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "migration file \"", file.file_name, "\" line ", line_number,
              ": a down file runs in one transaction and takes no directives"));
        }
      }
    }
    seen = file.file_name;
    pair.migration.version = parsed->version;
    pair.migration.name = parsed->name;
    (parsed->up ? pair.migration.up_sql : pair.migration.down_sql) =
        std::move(file.contents);
  }
  std::vector<Migration> migrations;
  for (auto& [version, pair] : by_version) {
    if (pair.up_file.empty() || pair.down_file.empty()) {
      const std::string& present =
          pair.up_file.empty() ? pair.down_file : pair.up_file;
      return absl::InvalidArgumentError(absl::StrCat(
          "migration file \"", present, "\" has no ",
          pair.up_file.empty() ? ".up.sql" : ".down.sql", " partner"));
    }
    pair.migration.checksum = Sha256Hex(pair.migration.up_sql);
    if (absl::Status parsed = ParseUpFile(pair.up_file, pair.migration);
        !parsed.ok()) {
      return parsed;
    }
    migrations.push_back(std::move(pair.migration));
  }
  return migrations;
}

absl::StatusOr<std::vector<Migration>> LoadMigrationsFromDir(
    const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat(
        "reading migrations directory \"", dir, "\": ", error.message()));
  }
  std::vector<MigrationFile> files;
  for (const auto& entry : it) {
    if (!entry.is_regular_file() || entry.path().extension() != ".sql") {
      continue;
    }
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream contents;
    if (!in.is_open() || !(contents << in.rdbuf())) {
      return absl::NotFoundError(absl::StrCat(
          "reading migration file \"", entry.path().string(), "\" failed"));
    }
    files.push_back({entry.path().filename().string(), contents.str()});
  }
  return BuildMigrations(std::move(files));
}

}  // namespace metrics::migrations
