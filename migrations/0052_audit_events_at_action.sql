-- limbo: indexes, built concurrently on a large PostgreSQL table
-- The audit page filtered by a time or by an action (store.AuditFilter.page)
-- read the trail from the newest event down until a page matched: for an
-- old day, every event since (1.8 s at 10 million events on PostgreSQL);
-- for an action nobody took lately, the whole trail (0.6 s).
--
-- A page filtered by time is read by time: from the end of the range
-- down, on this index, so it reads no event outside the range.
CREATE INDEX audit_events_at ON audit_events (at, seq);
-- A page filtered by action is read action by action, each newest first
-- on this index; the store lists the trail's actions from it too, one
-- probe each, to match the prefix a reader typed. Partial: the three
-- events of every attempt cycle are left out (store.cycleActions), so the
-- cycle writes nothing more here; they are frequent enough to be found by
-- reading from the newest. The query repeats the condition
-- (store.notCycleAction) so that the planner may use the index.
CREATE INDEX audit_events_action ON audit_events (action, seq)
    WHERE action NOT IN ('operation.registered', 'attempt.started', 'attempt.outcome');
