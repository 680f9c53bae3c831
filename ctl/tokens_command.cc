#include "ctl/tokens_command.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/time_format.h"
#include "ctl/command_failure.h"
#include "storage/pg/pg_token_store.h"

namespace metrics::ctl {

const char kTokensHelp[] =
    R"(Usage: metricsctl tokens <create|list|revoke> [options]

Manages the API tokens that callers of metricsd present as
"authorization: Bearer <token>". A token's secret is shown once, when it is
created; the database keeps only its SHA-256.

  create --role=admin|viewer|reporter [--trial=ID] [--ttl=DURATION] [--name=NAME]
          creates a token and prints it alone as the last line of stdout.
          admin: everything, tokens included; viewer: every read;
          reporter: ingest into trial ID and reads of it (--trial required).
          --ttl: how long it works, e.g. 90d, 12h, 30m (default: no end).
  list    lists every token (never the secrets): id, name, role, trial,
          created, expires, and state (active, expired or revoked)
  revoke ID
          revokes token ID for good

Run "metricsctl --help" for the options that select the database.
)";

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

int Usage(absl::string_view message) {
  std::cerr << "metricsctl: " << message
            << "\nRun \"metricsctl tokens --help\" for usage.\n";
  return 2;
}

std::string When(std::optional<int64_t> us) {
  if (!us) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMicros(*us),
                          absl::UTCTimeZone());
}

std::string State(const storage::ApiToken& t, int64_t now_us) {
  if (t.revoked_at_us) return "revoked";
  if (!storage::IsUsable(t, now_us)) return "expired";
  return "active";
}

std::string Describe(const storage::ApiToken& t) {
  std::string text =
      absl::StrCat(storage::TokenRoleName(t.role), " token ", t.id);
  if (!t.name.empty()) absl::StrAppend(&text, " \"", t.name, "\"");
  if (t.trial_id) absl::StrAppend(&text, " for trial ", *t.trial_id);
  absl::StrAppend(&text, t.expires_at_us
                             ? absl::StrCat(", expires ", When(t.expires_at_us))
                             : ", does not expire");
  return text;
}

int Create(const TokensArgs& args, storage::TokenStore& store) {
  if (!args.role)
    return Usage("tokens create needs --role=admin|viewer|reporter");
  storage::TokenRequest request;
  std::optional<storage::TokenRole> role = storage::ParseTokenRole(*args.role);
  if (!role) {
    return Usage(absl::StrCat("--role ", *args.role,
                              ": must be admin, viewer or reporter"));
  }
  request.role = *role;
  request.trial_id = args.trial;
  if (args.name) request.name = *args.name;
  if (args.ttl) {
    request.ttl = common::ParseDurationWithDays(*args.ttl);
    if (!request.ttl) {
      return Usage(absl::StrCat(
          "--ttl ", *args.ttl, ": must be a duration such as 90d, 12h or 30m"));
    }
  }
  if (absl::Status valid = storage::ValidateTokenRequest(request);
      !valid.ok()) {
    return Usage(absl::StrCat("--", valid.message()));
  }
  absl::StatusOr<storage::CreatedToken> created =
      store.Create(request, absl::Now() + kTimeout);
  if (!created.ok()) return Fail(created.status());
  std::cerr << "created " << Describe(created->token)
            << "; it is shown once, below, and cannot be shown again\n";
  std::cout << created->secret << std::endl;
  return 0;
}

int List(storage::TokenStore& store) {
  absl::StatusOr<std::vector<storage::ApiToken>> tokens =
      store.List(absl::Now() + kTimeout);
  if (!tokens.ok()) return Fail(tokens.status());
  const int64_t now = absl::ToUnixMicros(absl::Now());
  std::printf("%-6s %-24s %-8s %-7s %-23s %-23s %s\n", "ID", "NAME", "ROLE",
              "TRIAL", "CREATED", "EXPIRES", "STATE");
  for (const storage::ApiToken& t : *tokens) {
    std::printf("%-6lld %-24s %-8s %-7s %-23s %-23s %s\n",
                static_cast<long long>(t.id), t.name.c_str(),
                std::string(storage::TokenRoleName(t.role)).c_str(),
                t.trial_id ? absl::StrCat(*t.trial_id).c_str() : "-",
                When(t.created_at_us).c_str(), When(t.expires_at_us).c_str(),
                State(t, now).c_str());
  }
  std::printf("%zu token(s)\n", tokens->size());
  return 0;
}

int Revoke(const TokensArgs& args, storage::TokenStore& store) {
  if (args.words.size() != 3) return Usage("tokens revoke needs one token ID");
  int64_t id = 0;
  if (!absl::SimpleAtoi(args.words[2], &id) || id <= 0) {
    return Usage(absl::StrCat("tokens revoke ", args.words[2],
                              ": the ID must be a number (see tokens list)"));
  }
  absl::StatusOr<storage::ApiToken> revoked =
      store.Revoke(id, absl::Now() + kTimeout);
  if (!revoked.ok()) return Fail(revoked.status());
  std::cout << "revoked " << Describe(*revoked) << " at "
            << When(revoked->revoked_at_us) << "\n";
  return 0;
}

}  // namespace

int RunTokensCommand(const TokensArgs& args) {
  const std::vector<std::string>& w = args.words;
  if (w.size() < 2 || args.help) {
    std::cout << kTokensHelp;
    return args.help ? 0 : 2;
  }
  const std::string& sub = w[1];
  if (sub != "create" && sub != "list" && sub != "revoke") {
    return Usage(absl::StrCat("unknown command \"tokens ", sub, "\""));
  }
  if (sub != "create" && (args.role || args.trial || args.ttl || args.name)) {
    return Usage(
        absl::StrCat("--role, --trial, --ttl and --name are for "
                     "\"tokens create\", not \"tokens ",
                     sub, "\""));
  }
  if (sub != "revoke" && w.size() > 2) {
    return Usage(absl::StrCat("unexpected argument \"", w[2], "\""));
  }
  storage::pg::PgTokenStore store(args.database_url);
  if (sub == "create") return Create(args, store);
  if (sub == "list") return List(store);
  return Revoke(args, store);
}

}  // namespace metrics::ctl
