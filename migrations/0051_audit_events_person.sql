-- limbo: indexes, built concurrently on a large PostgreSQL table
-- The acts of one person (or operator), newest first (store.AuditFilter):
-- a manager asking what a reviewer did read the trail from the newest
-- event down until a page of theirs matched, which for someone who acts
-- rarely, or never, was the whole trail (62 ms at 1 million events on
-- PostgreSQL, ten times that at 10 million). Partial: the actors that act
-- by the thousand — API tokens, Limbo's own workers, signed webhooks — are
-- left out, so the attempt cycle's events write nothing more; their own
-- events are frequent enough to be found by reading from the newest.
-- The query repeats the condition (store.personActor) so that the planner
-- may use the index.
CREATE INDEX audit_events_person ON audit_events (actor, seq)
    WHERE actor NOT LIKE 'token:%' AND actor NOT LIKE 'system:%' AND actor NOT LIKE 'webhook:%';
