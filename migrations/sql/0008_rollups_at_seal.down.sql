-- Reverses 0008: format-2 rows become format 1 and the decoder of 0004
-- reads them again. Their values were not in system_rollups: after going
-- down, `metricsctl rollup rebuild` of the earlier version adds them
-- (docs/operating.md, "Upgrades").
UPDATE metrics_profiling SET packed_values = set_byte(packed_values, 0, 1)
  WHERE metric_group = 'system' AND packed_values IS NOT NULL
    AND get_byte(packed_values, 0) = 2;
DROP FUNCTION metrics_unpack(bytea);
ALTER FUNCTION metrics_unpack_format1(bytea) RENAME TO metrics_unpack;
