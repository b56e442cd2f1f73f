-- Console users, their server-side sessions, and login throttling.

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL,
    tenants       TEXT NOT NULL,       -- "*" or a comma-separated list
    disabled_at   TIMESTAMP,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);

-- The cookie holds a random session id; only its SHA-256 is stored, so a
-- database read does not yield usable cookies. Logout, disablement and a
-- role change end sessions here, at once.
CREATE TABLE sessions (
    id_hash      TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id),
    csrf_token   TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    last_seen_at TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP NOT NULL,
    ended_at     TIMESTAMP
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Failed sign-ins, by account and by address, for throttling.
CREATE TABLE login_failures (
    key TEXT NOT NULL,
    at  TIMESTAMP NOT NULL
);
CREATE INDEX login_failures_key ON login_failures (key, at);
