-- Rollups at seal: ingest stops adding each report to system_rollups. A raw
-- system row it writes is in format 2 of storage/format/packed_report.h,
-- format 1 with version byte 2, meaning "not in the rollups yet"; the
-- sealer adds a window's format-2 rows to the rollups in the transaction
-- that seals it, and readers of rollups add the format-2 rows still
-- waiting (docs/storage.md, "Rollups"). Rows of format 1 (written before)
-- are in the rollups already and stay so.
--
-- The SQL decoder of 0004 reads format 1 only: it is kept under another
-- name, and metrics_unpack reads both, so metrics_unpacked and
-- metrics_packed_json (which call it by name) see every row. Online: two
-- catalog changes, no row read or written.

-- migrate:step read format 2 in SQL
ALTER FUNCTION metrics_unpack(bytea) RENAME TO metrics_unpack_format1;
CREATE FUNCTION metrics_unpack(packed bytea)
  RETURNS TABLE (series_id bigint, value double precision)
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT * FROM metrics_unpack_format1(
    CASE WHEN length(packed) > 0 AND get_byte(packed, 0) = 2
         THEN set_byte(packed, 0, 1) ELSE packed END)
$$;
