-- card-polling: bounded tables. The retention job deletes old rows in small
-- batches, oldest first; these indexes let each batch read only the rows it deletes instead of
-- scanning the table from its start.
CREATE INDEX integration_logs_at ON integration_logs (at);
CREATE INDEX priority_item_events_at ON priority_item_events (at);
CREATE INDEX priority_trigger_events_at ON priority_trigger_events (at);
CREATE INDEX manual_triggers_requested ON manual_triggers (requested_at);
