-- A compensation left to a person (review.UndoByHand): the destination's
-- undo call would remove the whole resource, which other operations wrote
-- too. It is registered and tracked like any other, but Limbo's undo
-- worker does not send it; a reviewer says when it is done. 1 for such a
-- compensation, 0 for one Limbo sends.
ALTER TABLE compensations ADD COLUMN by_hand INTEGER NOT NULL DEFAULT 0;
