-- Login throttling by account × address (store/sessions.go). The old table
-- kept one row per key ("acct:…" or "addr:…"), so a failure's account and
-- address could not be read together, and the throttle could only lock an
-- account for everyone, its owner included. One row per failed sign-in now
-- names both. The old rows cannot be paired, so they are dropped: at most
-- one throttle window (15 minutes) of failures is forgotten at upgrade.
DROP TABLE login_failures;

CREATE TABLE login_failures (
    account TEXT NOT NULL,      -- the normalised email tried (known or not)
    addr    TEXT NOT NULL,      -- the client address (Echo's RealIP); IPv6 as its /64
    at      TIMESTAMP NOT NULL
);
-- Per account × address, and per account (its prefix).
CREATE INDEX login_failures_account_addr ON login_failures (account, addr, at);
-- Per address, across accounts.
CREATE INDEX login_failures_addr ON login_failures (addr, at);
-- Pruning what has aged out of the window.
CREATE INDEX login_failures_at ON login_failures (at);
