-- A decision that voids first approvals (a decision that moved the
-- operation, an approval that took the place of one whose approver may no
-- longer decide, one for another payload or key) names them: the decisions
-- feed lists each decision once, so a client waiting on an approval learns
-- it no longer counts from the decision that voided it. Space-separated
-- decision ids; '' for none.
ALTER TABLE decisions ADD COLUMN voided_approvals TEXT NOT NULL DEFAULT '';
