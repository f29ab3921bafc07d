-- Retention deletes events by their time: a BRIN index finds the old ones (events arrive in
-- time order, so each block range covers a narrow span) at almost no cost to inserts.
CREATE INDEX events_by_time ON events USING brin (time);
