-- Reverses 0002: back to per-series rollup rows (empty: rollups are derived
-- data; rebuild them from raw rows) and registry columns kept per commit
-- (filled with the time of this migration until rebuilt).
DROP TABLE trial_series_counts;

ALTER TABLE series
  DROP COLUMN created_at,
  ADD COLUMN first_time timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN last_time timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN sample_count bigint NOT NULL DEFAULT 0;
ALTER TABLE series
  ALTER COLUMN first_time DROP DEFAULT,
  ALTER COLUMN last_time DROP DEFAULT;

DROP TABLE system_rollups;

CREATE TABLE series_rollups (
  trial_id integer NOT NULL,
  series_id bigint NOT NULL,
  width_s integer NOT NULL,
  bucket_start timestamptz NOT NULL,
  sample_count bigint NOT NULL,
  value_sum double precision NOT NULL,
  value_min double precision NOT NULL,
  value_max double precision NOT NULL,
  first_time timestamptz NOT NULL,
  first_value double precision NOT NULL,
  last_time timestamptz NOT NULL,
  last_value double precision NOT NULL,
  PRIMARY KEY (trial_id, series_id, width_s, bucket_start),
  CONSTRAINT series_rollups_width_check CHECK (width_s > 0),
  CONSTRAINT series_rollups_count_check CHECK (sample_count > 0)
);
