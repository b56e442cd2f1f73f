-- Operations nobody is working on are failed (or escalated) once their
-- deadline passes; this index finds them without scanning the ledger.
CREATE INDEX operations_waiting_deadline ON operations (deadline)
    WHERE state IN ('pending', 'awaiting_approval', 'retry_wait', 'accepted');
