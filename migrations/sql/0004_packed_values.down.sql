-- Reverses 0004: packed rows get their values back as jsonb, the primary
-- key returns, the raw data horizon is forgotten (what retention removed
-- stays removed). Rollups are emptied: this release writes a packed format the
-- one before cannot read; they are derived data, rebuild them with
-- `metricsctl rollups rebuild` of that release.
DROP TABLE raw_retention;
ALTER TABLE system_rollups SET (fillfactor = 70);
TRUNCATE system_rollups;

UPDATE metrics SET metrics = metrics_packed_json(trial_id, packed_values),
                   packed_values = NULL
  WHERE packed_values IS NOT NULL;

DROP VIEW metrics_unpacked;
DROP FUNCTION metrics_packed_json(integer, bytea);
DROP FUNCTION metrics_unpack(bytea);

DROP INDEX metrics_profiling_other_idx;
DROP INDEX metrics_profiling_system_idx;
DROP INDEX metrics_generic_key;
DROP INDEX metrics_validation_key;
DROP INDEX metrics_training_key;
ALTER TABLE metrics
  ADD PRIMARY KEY (trial_id, metric_group, agent_id, end_time, id,
                   partition_type);

ALTER TABLE metrics
  DROP CONSTRAINT metrics_values_check,
  ALTER COLUMN metrics SET NOT NULL,
  DROP COLUMN packed_values;
