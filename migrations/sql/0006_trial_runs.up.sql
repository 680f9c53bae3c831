-- The platform's trial-metrics API (ReportTrialMetrics, GetMetrics): a
-- trial's run and the platform's generic metric rows in their own shape.
-- - trials.run_id: the newest run the trial reported; a report of an older
--   run is refused.
-- - metrics.trial_run_id and metrics.archived, the platform's columns: the
--   run a generic row came from, and whether a restarted run has passed it
--   (its rows after the step the new run resumed from are archived).
-- - an index per generic partition on (trial, total batches) of the rows
--   not archived: a report finds its step's row (a copy, or a part to
--   merge), a restart archives what it passed, and GetMetrics pages, each by
--   a short range instead of a scan of the trial's rows.
-- Online as 0004 is (docs/operating.md, "Upgrades"): the columns are
-- catalog changes (a constant default rewrites no row) and the indexes are
-- built concurrently.

-- migrate:step add the run columns
ALTER TABLE trials ADD COLUMN run_id integer;
ALTER TABLE metrics
  ADD COLUMN trial_run_id integer,
  ADD COLUMN archived boolean NOT NULL DEFAULT false;

-- migrate:step-outside-transaction index metrics_training by step
CREATE INDEX CONCURRENTLY metrics_training_steps_idx ON metrics_training
  (trial_id, total_batches) WHERE NOT archived;

-- migrate:step-outside-transaction index metrics_validation by step
CREATE INDEX CONCURRENTLY metrics_validation_steps_idx ON metrics_validation
  (trial_id, total_batches) WHERE NOT archived;

-- migrate:step-outside-transaction index metrics_generic by step
CREATE INDEX CONCURRENTLY metrics_generic_steps_idx ON metrics_generic
  (trial_id, total_batches) WHERE NOT archived;

-- migrate:step generic readers see the run columns too
CREATE OR REPLACE VIEW metrics_unpacked AS
  SELECT trial_id, id, partition_type, metric_group, agent_id, end_time,
         total_batches,
         coalesce(metrics, metrics_packed_json(trial_id, packed_values))
           AS metrics,
         trial_run_id, archived
  FROM metrics;
