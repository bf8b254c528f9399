-- D-access-console-session-credential: how many times an account's token has been set or revoked
-- through the API. A console session's credential covers it, so a token set again, even to the
-- value it had, does not bring back the sessions it opened before (a time stamp could repeat
-- within a millisecond or after the clock was set back; a counter cannot). Same as
-- migrations/sqlite/0008.
ALTER TABLE accounts ADD COLUMN token_generation BIGINT NOT NULL DEFAULT 0;
