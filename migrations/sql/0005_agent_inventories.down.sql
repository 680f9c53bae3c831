-- Reverses 0005: every agent inventory is dropped.
DROP TABLE agent_inventories;
