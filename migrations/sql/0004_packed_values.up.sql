-- System rows get small: a report's values move from jsonb keyed by name
-- and GPU UUID (about 1.3 KB for an 8-GPU agent) to `packed_values`, keyed by
-- series registry id with each value in as few bytes as its precision allows
-- (storage/packed_report.h: about 130 bytes). `metrics` is NULL in such rows;
-- exactly one of the two is set. Rows written before keep their jsonb and are
-- read as before. Generic readers read every row the same way through the
-- view metrics_unpacked, which gives `metrics` as jsonb in the old shape,
-- names and GPU UUIDs looked up in the series registry.
--
-- `metrics` is the platform's table, with every job's training metrics: the
-- steps below run while it is written to (docs/operating.md, "Upgrades").
-- No step rewrites rows or holds a lock that blocks writes for longer than a
-- catalog change; an index is built concurrently and the check validated
-- after it is in force.
--
-- The text this one replaced did the same in one transaction.
-- migrate:accepts-checksum fe0845eeb29af0cd45b2ade39ef206acc95ceee7fd23280a0c8eae7d8bd3f343

-- migrate:step add packed_values and its check, in force for new rows
ALTER TABLE metrics
  ADD COLUMN packed_values bytea,
  ALTER COLUMN metrics DROP NOT NULL,
  ADD CONSTRAINT metrics_values_check
    CHECK ((metrics IS NULL) <> (packed_values IS NULL)) NOT VALID;

-- migrate:step-outside-transaction check the rows already there
ALTER TABLE metrics VALIDATE CONSTRAINT metrics_values_check;

-- The primary key (trial_id, metric_group, agent_id, end_time, id,
-- partition_type) cost 135 bytes a system row, more than its packed values;
-- it enforced nothing (id alone is unique) and served range reads. The
-- platform's partitions keep it as a unique index each; the profiling
-- partition gets a narrow index for system rows and the wide one for its
-- other groups. The narrow one keys an agent by the hash of its id (4 bytes
-- instead of a host name of 20-30; readers also compare the id itself) and
-- leaves out `id`: about 32 bytes a row. Reads order by (end_time, id), an
-- incremental sort of the rare rows with equal times. The indexes are built
-- beside the key, which goes last.
-- migrate:step-outside-transaction index metrics_training
CREATE UNIQUE INDEX CONCURRENTLY metrics_training_key ON metrics_training
  (trial_id, metric_group, agent_id, end_time, id, partition_type);

-- migrate:step-outside-transaction index metrics_validation
CREATE UNIQUE INDEX CONCURRENTLY metrics_validation_key ON metrics_validation
  (trial_id, metric_group, agent_id, end_time, id, partition_type);

-- migrate:step-outside-transaction index metrics_generic
CREATE UNIQUE INDEX CONCURRENTLY metrics_generic_key ON metrics_generic
  (trial_id, metric_group, agent_id, end_time, id, partition_type);

-- migrate:step-outside-transaction index system rows of metrics_profiling
CREATE INDEX CONCURRENTLY metrics_profiling_system_idx ON metrics_profiling
  (trial_id, hashtext(agent_id), end_time) WHERE metric_group = 'system';

-- migrate:step-outside-transaction index other rows of metrics_profiling
CREATE INDEX CONCURRENTLY metrics_profiling_other_idx ON metrics_profiling
  (trial_id, metric_group, agent_id, end_time, id)
  WHERE metric_group <> 'system';

-- migrate:step functions, view and tables of packed values
-- The values of a packed_values column as (series_id, value) rows: the
-- decoder of storage/packed_report.cc and storage/value_codec.cc in SQL,
-- giving the same doubles bit for bit (decimal digits divided by an exact
-- power of ten, integers times a power of two, raw doubles rebuilt from
-- sign, exponent and mantissa).
CREATE FUNCTION metrics_unpack(packed bytea)
  RETURNS TABLE (series_id bigint, value double precision)
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  len integer := length(packed);
  pos integer := 1;
  id bigint := 0;
  head bigint;
  digits bigint;
  shift integer;
  b integer;
  kind integer;
  exponent integer;
  mantissa bigint;
  magnitude double precision;
BEGIN
  IF len = 0 OR get_byte(packed, 0) <> 1 THEN
    RAISE EXCEPTION 'packed values of % bytes are not in format 1', len;
  END IF;
  WHILE pos < len LOOP
    head := 0;
    shift := 0;
    LOOP
      b := get_byte(packed, pos);
      pos := pos + 1;
      head := head | ((b & 127)::bigint << shift);
      EXIT WHEN b < 128;
      shift := shift + 7;
      IF shift > 56 THEN
        RAISE EXCEPTION 'packed values: a series id of more than 63 bits';
      END IF;
    END LOOP;
    id := id + (head >> 4);
    kind := head & 15;
    IF kind = 7 THEN
      b := get_byte(packed, pos + 7);
      exponent := ((b & 127) << 4) | (get_byte(packed, pos + 6) >> 4);
      mantissa := (get_byte(packed, pos + 6) & 15)::bigint << 48;
      FOR i IN 0..5 LOOP
        mantissa := mantissa | (get_byte(packed, pos + i)::bigint << (8 * i));
      END LOOP;
      pos := pos + 8;
      IF exponent = 2047 THEN
        magnitude := CASE WHEN mantissa = 0 THEN 'Infinity' ELSE 'NaN' END;
      ELSIF exponent = 0 THEN
        magnitude := mantissa::float8 * power(2::float8, -1074);
      ELSE
        magnitude := (4503599627370496 + mantissa)::float8
                     * power(2::float8, exponent - 1075);
      END IF;
      value := CASE WHEN b >= 128 THEN -magnitude ELSE magnitude END;
    ELSE
      digits := 0;
      shift := 0;
      LOOP
        b := get_byte(packed, pos);
        pos := pos + 1;
        digits := digits | ((b & 127)::bigint << shift);
        EXIT WHEN b < 128;
        shift := shift + 7;
        IF shift > 56 THEN
          RAISE EXCEPTION 'packed values: digits of more than 63 bits';
        END IF;
      END LOOP;
      IF kind = 15 THEN  -- (m << 6 | k): m * 2^k
        value := (digits >> 6)::float8 * power(2::float8, digits & 63);
      ELSE
        magnitude := digits::float8 / power(10::float8, kind & 7);
        value := CASE WHEN kind >= 8 THEN -magnitude ELSE magnitude END;
      END IF;
    END IF;
    series_id := id;
    RETURN NEXT;
  END LOOP;
END
$$;

-- A packed row's values as the jsonb the row would have held before:
-- {"name": number} for an agent-wide series, {"name": {"GPU UUID": number}}
-- for GPU series (an agent-wide value of the same name under "").
CREATE FUNCTION metrics_packed_json(trial integer, packed bytea)
  RETURNS jsonb LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_object_agg(name, v), '{}') FROM (
    SELECT s.name,
           CASE WHEN count(*) = 1 AND min(s.gpu_uuid) = ''
                THEN to_jsonb(min(u.value))
                ELSE jsonb_object_agg(s.gpu_uuid, u.value) END AS v
    FROM metrics_unpack(packed) u
    JOIN series s ON s.trial_id = trial AND s.series_id = u.series_id
    GROUP BY s.name) n
$$;

-- Every row of `metrics` with its values as jsonb, packed or not.
CREATE VIEW metrics_unpacked AS
  SELECT trial_id, id, partition_type, metric_group, agent_id, end_time,
         total_batches,
         coalesce(metrics, metrics_packed_json(trial_id, packed_values))
           AS metrics
  FROM metrics;

-- Raw-data retention (metricsctl retention apply, metricsd --raw-retention):
-- raw system rows before `horizon` have been removed; their windows chart
-- from the rollups, which stay. Written before any row goes.
CREATE TABLE raw_retention (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  horizon timestamptz NOT NULL
);

-- Closed buckets are never updated again: fill their pages. The live
-- bucket's updates find room in the last pages, where new rows go.
ALTER TABLE system_rollups SET (fillfactor = 100);

-- migrate:step drop the old primary key
ALTER TABLE metrics DROP CONSTRAINT metrics_pkey;
