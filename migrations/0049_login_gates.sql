-- Sign-in's gate across instances (store/gate.go): one check at a time per
-- account and per address, from the throttle's check to the failure it
-- records. Each instance's own gate lets one of its sign-ins through at a
-- time; this row is the lease the one it lets through takes, so that
-- instances sharing the database do not check side by side. A lease whose
-- holder died is taken over once it is over.
CREATE TABLE login_gates (
    name   TEXT PRIMARY KEY,   -- "addr:…" or "acct:…"
    holder TEXT NOT NULL,      -- a random token per lease
    until  TIMESTAMP NOT NULL  -- when another may take it over
);
