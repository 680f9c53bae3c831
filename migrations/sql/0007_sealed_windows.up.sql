-- Sealed windows: each agent's closed 10-minute window of raw system rows
-- becomes one row of the profiling partition holding every report of the
-- window, times and values compressed along time (sealed_values, format of
-- storage/format/sealed_window.h: about 3 bytes a value where a row a report
-- costs 10). Exactly one of metrics, packed_values and sealed_values is set
-- in a row. A sealed row's end_time is its window's start (windows are
-- aligned to 600 s since the epoch), its id the smallest id of the rows it
-- took, so reports at equal times keep their order; its training batch
-- indexes are its column 0. The sealer (storage/pg/jobs/sealer.h) writes
-- them; readers take sealed and raw rows alike; generic readers see one row
-- a report through metrics_unpacked, as before.
--
-- The profiling partition's index of system rows becomes two of the same
-- columns: the rows waiting to be sealed (packed_values set), which the
-- sealer finds by the first, and the rest (sealed windows and rows of the
-- jsonb form). Readers read both. Online as 0004 is (docs/operating.md,
-- "Upgrades"): catalog changes, a check validated after it is in force,
-- indexes built and dropped concurrently; no row is rewritten.

-- migrate:step add sealed_values and the check that one form is set
ALTER TABLE metrics
  ADD COLUMN sealed_values bytea,
  ADD CONSTRAINT metrics_one_form_check
    CHECK (num_nonnulls(metrics, packed_values, sealed_values) = 1) NOT VALID;
ALTER TABLE metrics DROP CONSTRAINT metrics_values_check;

-- migrate:step-outside-transaction check the rows already there
ALTER TABLE metrics VALIDATE CONSTRAINT metrics_one_form_check;

-- migrate:step-outside-transaction index system rows waiting to be sealed
CREATE INDEX CONCURRENTLY metrics_profiling_raw_idx ON metrics_profiling
  (trial_id, hashtext(agent_id), end_time)
  WHERE metric_group = 'system' AND packed_values IS NOT NULL;

-- migrate:step-outside-transaction index sealed and jsonb system rows
CREATE INDEX CONCURRENTLY metrics_profiling_kept_idx ON metrics_profiling
  (trial_id, hashtext(agent_id), end_time)
  WHERE metric_group = 'system' AND packed_values IS NULL;

-- migrate:step functions and view of sealed windows
-- Every value of a sealed window as (report, time_us, series_id, value)
-- rows, by series then report (reports numbered from 1 in the window's
-- order): the decoder of storage/format/sealed_window.cc in SQL, the same
-- doubles bit for bit (NaN as NaN). Series 0 is the report's training
-- batch index.
CREATE FUNCTION metrics_unseal(sealed bytea)
  RETURNS TABLE (report integer, time_us bigint, series_id bigint,
                 value double precision)
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  len integer := length(sealed);
  pos integer := 1;            -- the next byte
  n integer;                   -- reports
  times bigint[];
  step bigint := 0;
  t bigint := 0;
  series integer;
  id bigint := -1;             -- column 0 is the batch index
  present integer;
  at integer[];
  kind integer;
  payload_end integer;
  u bigint;
  b integer;
  shift integer;
  -- the XOR stream's state
  bitpos bigint;
  prev bigint;
  lead integer;
  trail integer;
  width integer;
  x bigint;
  take integer;
  off integer;
  digits bigint;
  places double precision;
  exponent integer;
  mantissa bigint;
  magnitude double precision;
  i integer;
  k integer;
BEGIN
  -- A stored window is TOASTed: without a copy of its own, every get_byte
  -- would fetch and decompress all of it again.
  sealed := sealed || '\x'::bytea;
  IF len = 0 OR get_byte(sealed, 0) <> 1 THEN
    RAISE EXCEPTION 'sealed window of % bytes is not in format 1', len;
  END IF;
  -- A varint at pos, into u (at most 63 bits).
  -- (Written out at each use: PL/pgSQL has no inline procedures.)
  u := 0; shift := 0;
  LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
       EXIT WHEN b < 128; shift := shift + 7; END LOOP;
  n := u;
  times := array_fill(0::bigint, ARRAY[n]);
  FOR r IN 1..n LOOP
    u := 0; shift := 0;
    LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
         EXIT WHEN b < 128; shift := shift + 7; END LOOP;
    u := (u >> 1) # -(u & 1);  -- zigzag
    IF r = 1 THEN t := u; ELSE step := step + u; t := t + step; END IF;
    times[r] := t;
  END LOOP;
  u := 0; shift := 0;
  LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
       EXIT WHEN b < 128; shift := shift + 7; END LOOP;
  series := u;
  FOR s IN 1..series LOOP
    u := 0; shift := 0;
    LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
         EXIT WHEN b < 128; shift := shift + 7; END LOOP;
    id := id + u;
    u := 0; shift := 0;
    LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
         EXIT WHEN b < 128; shift := shift + 7; END LOOP;
    present := u;
    IF present < n THEN
      -- Filled in place: appending would copy the array each time.
      at := array_fill(0, ARRAY[greatest(present, 1)]);
      k := 0;
      FOR r IN 0..n - 1 LOOP
        IF (get_byte(sealed, pos + r / 8) >> (r % 8)) & 1 = 1 THEN
          k := k + 1;
          at[k] := r + 1;
        END IF;
      END LOOP;
      pos := pos + (n + 7) / 8;
    ELSE
      at := NULL;
    END IF;
    kind := get_byte(sealed, pos);
    pos := pos + 1;
    u := 0; shift := 0;
    LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
         EXIT WHEN b < 128; shift := shift + 7; END LOOP;
    payload_end := pos + u;
    series_id := id;
    IF kind = 0 THEN
      bitpos := pos::bigint * 8;
      lead := -1; trail := 0;
      FOR v IN 1..present LOOP
        IF v = 1 THEN
          width := 64;
        ELSE
          b := (get_byte(sealed, (bitpos / 8)::integer) >> (7 - (bitpos % 8)::integer)) & 1;
          bitpos := bitpos + 1;
          IF b = 0 THEN
            width := 0;
          ELSE
            b := (get_byte(sealed, (bitpos / 8)::integer) >> (7 - (bitpos % 8)::integer)) & 1;
            bitpos := bitpos + 1;
            IF b = 1 THEN
              lead := 0; width := 0;
              FOR j IN 1..11 LOOP
                width := (width << 1) |
                  ((get_byte(sealed, (bitpos / 8)::integer) >> (7 - (bitpos % 8)::integer)) & 1);
                bitpos := bitpos + 1;
              END LOOP;
              lead := width >> 6;
              width := (width & 63) + 1;
              trail := 64 - lead - width;
            ELSE
              width := 64 - lead - trail;
            END IF;
          END IF;
        END IF;
        -- `width` bits, a byte's part at a time.
        x := 0; k := width;
        WHILE k > 0 LOOP
          off := (bitpos % 8)::integer;
          take := least(k, 8 - off);
          x := (x << take) | ((get_byte(sealed, (bitpos / 8)::integer) >> (8 - off - take)) & ((1 << take) - 1));
          bitpos := bitpos + take;
          k := k - take;
        END LOOP;
        IF v = 1 THEN prev := x; ELSIF width > 0 THEN prev := prev # (x << trail); END IF;
        -- The double of prev's bits, as metrics_unpack rebuilds one.
        exponent := ((prev >> 52) & 2047)::integer;
        mantissa := prev & 4503599627370495;
        IF exponent = 2047 THEN
          magnitude := CASE WHEN mantissa = 0 THEN 'Infinity' ELSE 'NaN' END;
        ELSIF exponent = 0 THEN
          magnitude := mantissa::float8 * power(2::float8, -1074);
        ELSE
          magnitude := (4503599627370496 + mantissa)::float8 * power(2::float8, exponent - 1075);
        END IF;
        value := CASE WHEN prev < 0 THEN -magnitude ELSE magnitude END;
        report := CASE WHEN at IS NULL THEN v ELSE at[v] END;
        time_us := times[report];
        RETURN NEXT;
      END LOOP;
    ELSE
      places := power(10::float8, kind - 1);
      digits := 0;
      FOR v IN 1..present LOOP
        u := 0; shift := 0;
        LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
             EXIT WHEN b < 128; shift := shift + 7; END LOOP;
        digits := digits + ((u >> 1) # -(u & 1));
        value := digits::float8 / places;
        report := CASE WHEN at IS NULL THEN v ELSE at[v] END;
        time_us := times[report];
        RETURN NEXT;
      END LOOP;
    END IF;
    pos := payload_end;
  END LOOP;
END
$$;

-- Every report of a sealed window as (report, time_us), values or not.
CREATE FUNCTION metrics_sealed_times(sealed bytea)
  RETURNS TABLE (report integer, time_us bigint)
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  pos integer := 1;
  n integer;
  u bigint;
  b integer;
  shift integer;
  step bigint := 0;
BEGIN
  sealed := sealed || '\x'::bytea;  -- detoasted once (metrics_unseal says why)
  IF length(sealed) = 0 OR get_byte(sealed, 0) <> 1 THEN
    RAISE EXCEPTION 'sealed window of % bytes is not in format 1', length(sealed);
  END IF;
  u := 0; shift := 0;
  LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
       EXIT WHEN b < 128; shift := shift + 7; END LOOP;
  n := u;
  FOR r IN 1..n LOOP
    u := 0; shift := 0;
    LOOP b := get_byte(sealed, pos); pos := pos + 1; u := u | ((b & 127)::bigint << shift);
         EXIT WHEN b < 128; shift := shift + 7; END LOOP;
    u := (u >> 1) # -(u & 1);  -- zigzag
    IF r = 1 THEN time_us := u; ELSE step := step + u; time_us := time_us + step; END IF;
    report := r;
    RETURN NEXT;
  END LOOP;
END
$$;

-- A sealed window's reports as the rows they were: time, batch index and
-- the values as jsonb in metrics_packed_json's shape.
CREATE FUNCTION metrics_sealed_reports(trial integer, sealed bytea)
  RETURNS TABLE (end_time timestamptz, total_batches integer, metrics jsonb)
  LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  WITH v AS MATERIALIZED (SELECT * FROM metrics_unseal(sealed)),
  named AS (
    SELECT v.report, s.name,
           CASE WHEN count(*) = 1 AND min(s.gpu_uuid) = ''
                THEN to_jsonb(min(v.value))
                ELSE jsonb_object_agg(s.gpu_uuid, v.value) END AS value
    FROM v JOIN series s ON s.trial_id = trial AND s.series_id = v.series_id
    GROUP BY v.report, s.name),
  per_report AS (
    SELECT report, jsonb_object_agg(name, value) AS metrics FROM named GROUP BY report),
  batches AS (SELECT report, value::integer AS batch FROM v WHERE series_id = 0)
  SELECT timestamptz 'epoch' + t.time_us * interval '1 microsecond', b.batch,
         coalesce(p.metrics, '{}')
  FROM metrics_sealed_times(sealed) t
  LEFT JOIN per_report p USING (report)
  LEFT JOIN batches b USING (report)
  ORDER BY t.report
$$;

-- Every row of `metrics` with its values as jsonb, a sealed window as one
-- row a report (each with the window's id).
CREATE OR REPLACE VIEW metrics_unpacked AS
  SELECT trial_id, id, partition_type, metric_group, agent_id, end_time,
         total_batches,
         coalesce(metrics, metrics_packed_json(trial_id, packed_values))
           AS metrics,
         trial_run_id, archived
  FROM metrics WHERE sealed_values IS NULL
  UNION ALL
  SELECT m.trial_id, m.id, m.partition_type, m.metric_group, m.agent_id,
         r.end_time, r.total_batches, r.metrics, m.trial_run_id, m.archived
  FROM metrics m CROSS JOIN LATERAL metrics_sealed_reports(m.trial_id, m.sealed_values) r
  WHERE m.sealed_values IS NOT NULL;

-- migrate:step-outside-transaction drop the index of every system row
DROP INDEX CONCURRENTLY IF EXISTS metrics_profiling_system_idx;
