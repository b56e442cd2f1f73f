-- Open cases counted per (tenant, destination, action, flags, reason set),
-- kept by the store in the transaction that opens, re-assesses or resolves
-- a case. The queue's counts then sum a few hundred rows instead of
-- grouping every open case on every page view (about 10 ms at 50,000).
CREATE TABLE open_case_counts (
    tenant      TEXT NOT NULL,
    destination TEXT NOT NULL,
    action      TEXT NOT NULL,
    flags       TEXT NOT NULL,
    reason_bits BIGINT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (tenant, destination, action, flags, reason_bits)
);

INSERT INTO open_case_counts (tenant, destination, action, flags, reason_bits, n)
SELECT tenant, destination, action, flags, reason_bits, COUNT(*)
FROM cases WHERE status = 'open'
GROUP BY tenant, destination, action, flags, reason_bits;
