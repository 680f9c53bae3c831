-- Reverses 0007: every sealed window goes back to rows of the jsonb form,
-- one a report (new ids), and the schema to 0006's. Not online: it writes
-- every sealed value again in one transaction (docs/operating.md,
-- "Upgrades").
INSERT INTO metrics_profiling (trial_id, partition_type, metric_group, agent_id,
                               end_time, total_batches, metrics, trial_run_id,
                               archived)
  SELECT m.trial_id, m.partition_type, m.metric_group, m.agent_id, r.end_time,
         r.total_batches, r.metrics, m.trial_run_id, m.archived
  FROM metrics_profiling m
  CROSS JOIN LATERAL metrics_sealed_reports(m.trial_id, m.sealed_values) r
  WHERE m.sealed_values IS NOT NULL;
DELETE FROM metrics_profiling WHERE sealed_values IS NOT NULL;
CREATE OR REPLACE VIEW metrics_unpacked AS
  SELECT trial_id, id, partition_type, metric_group, agent_id, end_time,
         total_batches,
         coalesce(metrics, metrics_packed_json(trial_id, packed_values))
           AS metrics,
         trial_run_id, archived
  FROM metrics;
DROP FUNCTION metrics_sealed_reports(integer, bytea);
DROP FUNCTION metrics_sealed_times(bytea);
DROP FUNCTION metrics_unseal(bytea);
CREATE INDEX metrics_profiling_system_idx ON metrics_profiling
  (trial_id, hashtext(agent_id), end_time) WHERE metric_group = 'system';
DROP INDEX metrics_profiling_kept_idx;
DROP INDEX metrics_profiling_raw_idx;
ALTER TABLE metrics
  DROP CONSTRAINT metrics_one_form_check,
  DROP COLUMN sealed_values,
  ADD CONSTRAINT metrics_values_check
    CHECK ((metrics IS NULL) <> (packed_values IS NULL));
