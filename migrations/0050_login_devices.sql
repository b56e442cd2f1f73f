-- Browsers an account has signed in with (store/sessions.go, device
-- cookies): a browser that signed in to an account holds a random token
-- for it, and there its own failures alone are counted. An attacker at the
-- same address (behind one office NAT) who fails on the account, without
-- the token, can no longer lock its owner out of the browser they use.
CREATE TABLE login_devices (
    token_hash TEXT PRIMARY KEY,  -- SHA-256 of the cookie's token
    account    TEXT NOT NULL,     -- the normalised email it was issued for
    last_at    TIMESTAMP NOT NULL -- the latest sign-in with it
);
-- Pruning the tokens no longer honoured.
CREATE INDEX login_devices_last_at ON login_devices (last_at);
-- A failure made with a device token ('' without one) is counted for that
-- token only, and not for its account × address, address or account.
ALTER TABLE login_failures ADD COLUMN device TEXT NOT NULL DEFAULT '';
CREATE INDEX login_failures_device ON login_failures (device, at);
-- The addresses accounts signed in from (0046) exempted them there from
-- the address's limit and the account's ceiling; the device token does
-- that now, for the browser rather than for anyone at the address, and an
-- exemption anyone at the address could observe told them which accounts
-- sign in from there.
DROP TABLE login_known;
