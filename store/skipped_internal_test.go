package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestReadClaimedEndsAtAnUnreachableDatabase: the rows a round claimed
// are read one by one (readClaimed). A row whose read fails is skipped,
// the others returned; but a database that cannot be reached ends the
// round at that row: the rows after it are not read (each would fail the
// same way and be counted as a row at fault), the rows read before are
// returned, and the round's error says the database is unavailable and
// keeps the rows skipped so far, the claim's own included. PostgreSQL
// cannot be made to fail a read this way on purpose, so the read is a
// function here.
func TestReadClaimedEndsAtAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	claimSkipped := &SkippedRows{Round: "store.ClaimWatches", Rows: []SkippedRow{{ID: "op-0", Err: errors.New("could not claim")}}}
	poison := errors.New("cannot scan column")
	var read []string
	got, err := readClaimed(context.Background(), claimSkipped, "store.ClaimWatches", []string{"op-1", "op-2", "op-3", "op-4"},
		func(id string) (string, error) {
			read = append(read, id)
			switch id {
			case "op-2":
				return "", poison
			case "op-3":
				return "", fmt.Errorf("select: %w", driver.ErrBadConn)
			}
			return "claim of " + id, nil
		})
	if !slices.Equal(read, []string{"op-1", "op-2", "op-3"}) {
		t.Errorf("read %v; want op-1, op-2, op-3 and nothing after the database went", read)
	}
	if !slices.Equal(got, []string{"claim of op-1"}) {
		t.Errorf("returned %v; want op-1's claim alone", got)
	}
	if !IsUnavailable(err) {
		t.Fatalf("the round's error %v does not say the database is unavailable", err)
	}
	var sk *SkippedRows
	if !errors.As(err, &sk) {
		t.Fatalf("the round's error %v lost the rows skipped", err)
	}
	var ids []string
	for _, r := range sk.Rows {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"op-0", "op-2"}) || !errors.Is(err, poison) {
		t.Errorf("skipped %v (%v); want op-0 (the claim's) and op-2 (its read), and op-3 not counted as a row at fault", ids, err)
	}

	// The same reads with the database there: every readable row returned,
	// the poison one skipped, and no word of an outage.
	got, err = readClaimed(context.Background(), nil, "store.ClaimWatches", []string{"op-1", "op-2"}, func(id string) (string, error) {
		if id == "op-2" {
			return "", poison
		}
		return id, nil
	})
	if IsUnavailable(err) || !errors.As(err, &sk) || len(sk.Rows) != 1 || !slices.Equal(got, []string{"op-1"}) {
		t.Errorf("with the database there: %v, %v; want op-1 and op-2 skipped", got, err)
	}
}
