-- The tenants an audit event about a console user concerns. Such an event
-- (user.added, user.changed, user.password_reset) has no tenant of its own,
-- so only readers of every tenant saw it; a manager of acme could not read
-- who was given or lost access to acme. Each one now lists here the tenants
-- the user had and has ('*' for all tenants), written in the transaction
-- that writes the event (store.appendUserEvent), and a reader scoped to one
-- of them sees it (store.aboutTenants).
--
-- Beside audit_events, not in it: an event's hash covers its own columns,
-- and the events already written, and their hashes, stay as they are.
-- Those older events have no rows here: they stay visible to readers of
-- every tenant only.
CREATE TABLE audit_event_tenants (
    seq    BIGINT NOT NULL,
    tenant TEXT NOT NULL,
    PRIMARY KEY (seq, tenant)
);
CREATE INDEX audit_event_tenants_tenant ON audit_event_tenants (tenant, seq);
