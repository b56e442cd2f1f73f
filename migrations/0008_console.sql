-- Secrets the server generates once and every instance shares (the session
-- cookie keys), so a second instance accepts the first one's cookies.
CREATE TABLE app_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);
