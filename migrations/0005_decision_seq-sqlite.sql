-- SQLite numbers decisions with MAX(seq) + 1 under its single writer: nothing to create.
SELECT 1;
