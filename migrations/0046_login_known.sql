-- Addresses an account has signed in from (store/sessions.go): there the
-- address's limit and the account's ceiling do not refuse it, so neither
-- an attacker behind the same office NAT or IPv6 /64 nor one failing on
-- the account from many addresses locks its owner out of the address they
-- use. The account × address limit still applies there.
CREATE TABLE login_known (
    account TEXT NOT NULL,      -- the normalised email
    addr    TEXT NOT NULL,      -- as login_failures.addr (IPv6 as its /64)
    last_at TIMESTAMP NOT NULL, -- the latest sign-in from there
    PRIMARY KEY (account, addr)
);
-- Pruning what is no longer known.
CREATE INDEX login_known_last_at ON login_known (last_at);
