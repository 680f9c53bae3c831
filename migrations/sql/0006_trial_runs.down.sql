-- Reverses 0006: the run columns and their indexes go (generic rows keep
-- their values; which run wrote them and which were archived is lost).
-- A view's columns can only be dropped with the view.
DROP VIEW metrics_unpacked;
CREATE VIEW metrics_unpacked AS
  SELECT trial_id, id, partition_type, metric_group, agent_id, end_time,
         total_batches,
         coalesce(metrics, metrics_packed_json(trial_id, packed_values))
           AS metrics
  FROM metrics;
DROP INDEX metrics_generic_steps_idx;
DROP INDEX metrics_validation_steps_idx;
DROP INDEX metrics_training_steps_idx;
ALTER TABLE metrics DROP COLUMN archived, DROP COLUMN trial_run_id;
ALTER TABLE trials DROP COLUMN run_id;
