-- Decision sequence numbers are taken inside the deciding transaction.
CREATE SEQUENCE decisions_seq;
