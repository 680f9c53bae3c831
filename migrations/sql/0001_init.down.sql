-- Reverses 0001_init: drops every table it created (partitions and owned
-- sequences go with their tables).
DROP TABLE trial_profiler_metrics;
DROP TABLE ingest_positions;
DROP TABLE series_rollups;
DROP TABLE series;
DROP TABLE metrics;
DROP TABLE trials;
