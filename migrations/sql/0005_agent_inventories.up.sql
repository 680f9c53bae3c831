-- The hardware each agent of a trial runs on (GPU models and UUIDs, driver
-- and CUDA versions, CPU, memory), as the agent last sent it with a batch of
-- system metrics: one row per trial and agent, replaced by a newer one. The
-- document is proto AgentInventory (ingest.proto) in its JSON form. Like
-- every per-trial table, keyed by trial_id first, with no foreign key.
CREATE TABLE agent_inventories (
  trial_id integer NOT NULL,
  agent_id text NOT NULL,
  inventory jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (trial_id, agent_id)
);
