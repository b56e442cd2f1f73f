-- Refused sign-ins, one row per throttled scope (store/sessions.go): the
-- audit trail records when a refusal period starts (and every tenfold of
-- its refusals), not every refused request, since anyone can send
-- sign-ins and the trail is kept for years. A period ends when its last
-- refusal's wait is over; the next refusal of the scope starts a new one.
CREATE TABLE login_throttles (
    scope    TEXT PRIMARY KEY,   -- "pair:<account> <addr>", "addr:<addr>" or "acct:<account>"
    rule     TEXT NOT NULL,      -- the rule that refused (throttleWait)
    since    TIMESTAMP NOT NULL, -- the period's first refusal
    ends_at  TIMESTAMP NOT NULL, -- when its latest refusal said to try again
    refusals BIGINT NOT NULL     -- refused sign-ins in the period
);
-- Pruning periods that are over.
CREATE INDEX login_throttles_ends_at ON login_throttles (ends_at);
