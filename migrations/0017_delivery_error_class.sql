-- A delivery try records the class of its failure (policy, dns, connect,
-- tls, timeout, http_status) and a fixed message for it, never the raw
-- dial error: that named internal addresses and ports and told a refused
-- port from a filtered one, a port scanner for whoever may add an
-- endpoint. The tries recorded before are classified and rewritten the
-- same way, from the text Go's errors gave them.
ALTER TABLE webhook_deliveries ADD COLUMN error_class TEXT NOT NULL DEFAULT '';

UPDATE webhook_deliveries SET error_class = CASE
    WHEN error LIKE 'HTTP %' THEN 'http_status'
    WHEN error LIKE '%address is link-local, unspecified or multicast: refused%' THEN 'policy'
    WHEN error LIKE '%no such host%' OR error LIKE '%lookup %' THEN 'dns'
    WHEN error LIKE '%tls:%' OR error LIKE '%x509:%' OR error LIKE '%HTTPS client%' THEN 'tls'
    WHEN error LIKE '%timeout%' OR error LIKE '%deadline exceeded%' THEN 'timeout'
    ELSE 'connect'
END
WHERE error <> '';

-- The messages netguard.Explain gives; "; endpoint disabled" is kept.
UPDATE webhook_deliveries SET error = CASE error_class
    WHEN 'policy' THEN 'refused by policy: link-local, unspecified or multicast address'
    WHEN 'dns' THEN 'the name did not resolve'
    WHEN 'tls' THEN 'the TLS handshake failed'
    WHEN 'timeout' THEN 'no answer in time'
    ELSE 'no connection, or it closed without an answer'
END || CASE WHEN error LIKE '%; endpoint disabled' THEN '; endpoint disabled' ELSE '' END
WHERE error_class IN ('policy', 'dns', 'tls', 'timeout', 'connect');

-- The outbox keeps each message's last error: the same rewrite.
UPDATE outbox SET last_error = CASE
    WHEN last_error LIKE '%address is link-local, unspecified or multicast: refused%'
        THEN 'refused by policy: link-local, unspecified or multicast address'
    WHEN last_error LIKE '%no such host%' OR last_error LIKE '%lookup %' THEN 'the name did not resolve'
    WHEN last_error LIKE '%tls:%' OR last_error LIKE '%x509:%' OR last_error LIKE '%HTTPS client%' THEN 'the TLS handshake failed'
    WHEN last_error LIKE '%timeout%' OR last_error LIKE '%deadline exceeded%' THEN 'no answer in time'
    ELSE 'no connection, or it closed without an answer'
END || CASE WHEN last_error LIKE '%; endpoint disabled' THEN '; endpoint disabled' ELSE '' END
WHERE last_error <> '' AND last_error NOT LIKE 'HTTP %' AND last_error <> 'endpoint disabled';
