-- API tokens: who may call metricsd. A token is shown once when created and
-- stored only as its SHA-256 hash; the hash finds it (unique index), so the
-- secret itself is never in the database. A reporter token is bound to one
-- trial; admin and viewer tokens to none. A revoked or expired token is kept
-- (revoked_at, expires_at) so `metricsctl tokens list` can show what ended.
CREATE TABLE api_tokens (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL DEFAULT '',
  role text NOT NULL,
  trial_id integer,
  token_sha256 bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'viewer', 'reporter')),
  CONSTRAINT api_tokens_trial_check CHECK ((role = 'reporter') = (trial_id IS NOT NULL)),
  CONSTRAINT api_tokens_hash_check CHECK (length(token_sha256) = 32)
);
