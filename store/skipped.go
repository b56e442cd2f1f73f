package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/limbo-dev/limbo/review"
)

// SkippedRows is the error of a background round that went past rows it
// could not handle. Each failed in a transaction of its own, rolled back
// (nothing of it written), and the round went on with the rows after it:
// one row that fails every time (data the code cannot process, a
// constraint it trips) must not hold back every row behind it. A skipped
// row is neither dropped nor marked done: the next round selects it again.
type SkippedRows struct {
	// Round names the store call ("store.SweepLeases").
	Round string
	Rows  []SkippedRow
}

// SkippedRow is one row a round skipped, by its id, and why.
type SkippedRow struct {
	ID  string
	Err error
}

func (e *SkippedRows) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d row(s) skipped, tried again next round", e.Round, len(e.Rows))
	for _, r := range e.Rows {
		fmt.Fprintf(&b, "; %s: %v", r.ID, r.Err)
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each row's error.
func (e *SkippedRows) Unwrap() []error {
	out := make([]error, len(e.Rows))
	for i, r := range e.Rows {
		out[i] = r.Err
	}
	return out
}

// SkippedRows says how many rows the round skipped (what loop counts in
// limbo_loop_rows_skipped_total).
func (e *SkippedRows) SkippedRows() int { return len(e.Rows) }

// skip adds row id's failure to *sk, made on first use.
func skip(sk **SkippedRows, round, id string, err error) {
	if *sk == nil {
		*sk = &SkippedRows{Round: round}
	}
	(*sk).Rows = append((*sk).Rows, SkippedRow{ID: id, Err: err})
}

// orNil is sk as an error: nil when no row was skipped (a nil
// *SkippedRows in an error interface would not be nil).
func (sk *SkippedRows) orNil() error {
	if sk == nil {
		return nil
	}
	return sk
}

// roundEnds is the error of a round stopped at a database that cannot be
// reached (IsUnavailable): every row after would fail the same way, and
// skipping each would count it, in limbo_loop_rows_skipped_total and the
// log, as a row at fault. The rows skipped before stay counted; the rest
// wait for the next round, as skipped ones do.
func roundEnds(sk *SkippedRows, round string, err error) error {
	return errors.Join(sk.orNil(), fmt.Errorf("%s: the database cannot be reached, the round ends here: %w", round, err))
}

// readClaimed reads each of the rows a round claimed (ids) with read,
// one round (eachRow) that goes on from the claim's skipped rows, sk. A
// row whose read fails is skipped: its claim lapses with its lease and it
// is due again; the others are returned. One row that cannot be read
// (data the code cannot scan) must not hold back every row claimed with
// it, round after round.
func readClaimed[C any](ctx context.Context, sk *SkippedRows, round string, ids []string, read func(id string) (C, error)) ([]C, error) {
	out := make([]C, 0, len(ids))
	_, err := eachRow(ctx, round, sk, ids, func(id string) string { return id }, func(error) bool { return false }, func(id string) (bool, error) {
		c, err := read(id)
		if err == nil {
			out = append(out, c)
		}
		return true, err
	})
	return out, err
}

// eachRow is a round over rows: handle does one row (a sweep's, in a
// transaction of its own) and says whether it did something (counted).
// A row whose handling fails is skipped, its id added to skipped (those
// the round began with; nil: none), unless expected says the error is
// one a row moved on meanwhile may give; a database that cannot be
// reached, or ctx ending, ends the round.
func eachRow[R any](ctx context.Context, round string, skipped *SkippedRows, rows []R, id func(R) string, expected func(error) bool,
	handle func(R) (bool, error)) (int, error) {
	n := 0
	for _, r := range rows {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		done, err := handle(r)
		switch {
		case IsUnavailable(err):
			return n, roundEnds(skipped, round, err)
		case err != nil && !expected(err):
			skip(&skipped, round, id(r), err)
		case err == nil && done:
			n++
		}
	}
	return n, skipped.orNil()
}

// movedOn: the errors a sweep expects of a row that changed since it was
// listed (review.ErrConflict) or is gone (review.ErrNotFound).
func movedOn(err error) bool {
	return errors.Is(err, review.ErrConflict) || errors.Is(err, review.ErrNotFound)
}
