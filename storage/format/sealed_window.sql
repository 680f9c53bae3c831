-- The decoder of storage/format/sealed_window.cc in SQL, giving the same
-- doubles bit for bit: every value of a sealed window as (time_us,
-- series_id, value) rows, by series then time. Not yet a migration: the
-- sealer that writes such windows is to come, and this file is what
-- SealedWindowSqlTest checks against the C++ decoder.
CREATE FUNCTION metrics_unseal(sealed bytea)
  RETURNS TABLE (time_us bigint, series_id bigint, value double precision)
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  len integer := length(sealed);
  pos integer := 1;            -- the next byte
  n integer;                   -- reports
  times bigint[];
  step bigint := 0;
  t bigint := 0;
  series integer;
  id bigint := 0;
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
      at := ARRAY[]::integer[];
      FOR r IN 0..n - 1 LOOP
        IF (get_byte(sealed, pos + r / 8) >> (r % 8)) & 1 = 1 THEN at := at || (r + 1); END IF;
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
        time_us := times[CASE WHEN at IS NULL THEN v ELSE at[v] END];
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
        time_us := times[CASE WHEN at IS NULL THEN v ELSE at[v] END];
        RETURN NEXT;
      END LOOP;
    END IF;
    pos := payload_end;
  END LOOP;
END
$$;
