-- Reverses 0003: every API token is dropped.
DROP TABLE api_tokens;
