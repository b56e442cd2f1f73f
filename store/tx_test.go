package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// serialisationFailure is what PostgreSQL answers a transaction that lost
// a race: WithTx runs the closure again (on either engine: the check is by
// error, not by engine).
var serialisationFailure = &pq.Error{Code: "40001", Message: "could not serialize access due to concurrent update"}

// TestInTxRetryKeepsOneTry: a closure retried after a serialisation
// failure hands back what the try that committed built, not what every try
// appended, and the failed try's writes are rolled back.
func TestInTxRetryKeepsOneTry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		tries := 0
		var everyTry []string // what a closure writing a captured slice would return
		got, err := store.InTx(ctx, s, func(tx *sqlx.Tx) ([]string, error) {
			tries++
			var out []string
			for i := 1; i <= 2; i++ {
				name := fmt.Sprintf("retry-%d-%d", tries, i)
				if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO tenants (name, created_at) VALUES (?, ?)`), name, t0); err != nil {
					return nil, err
				}
				out = append(out, name)
				everyTry = append(everyTry, name)
			}
			if tries == 1 {
				return out, fmt.Errorf("insert: %w", serialisationFailure)
			}
			return out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if tries != 2 || len(everyTry) != 4 {
			t.Fatalf("tries = %d, appended %v: want a second try", tries, everyTry)
		}
		if want := []string{"retry-2-1", "retry-2-2"}; !slices.Equal(got, want) {
			t.Fatalf("result %v, want the committed try's %v", got, want)
		}
		var stored []string
		if err := s.DB().SelectContext(ctx, &stored, `SELECT name FROM tenants WHERE name LIKE 'retry-%' ORDER BY name`); err != nil {
			t.Fatal(err)
		}
		if want := []string{"retry-2-1", "retry-2-2"}; !slices.Equal(stored, want) {
			t.Fatalf("stored %v, want only the committed try's %v", stored, want)
		}
	})
}

// TestInTxGivesUp: a closure that keeps failing is tried a bounded number
// of times, and its result is dropped with the error.
func TestInTxGivesUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		tries := 0
		got, err := store.InTx(ctx, s, func(tx *sqlx.Tx) ([]int, error) {
			tries++
			return []int{tries}, serialisationFailure
		})
		if !errors.Is(err, serialisationFailure) || got != nil {
			t.Fatalf("got %v, %v; want no result and the failure", got, err)
		}
		if tries != 6 {
			t.Fatalf("tries = %d, want 6 (the first and five retries)", tries)
		}
		boom := errors.New("not retryable")
		tries = 0
		n, err := store.InTx(ctx, s, func(tx *sqlx.Tx) (int, error) {
			tries++
			return 7, boom
		})
		if !errors.Is(err, boom) || n != 0 || tries != 1 {
			t.Fatalf("got %d, %v after %d tries; want 0, the error, one try", n, err, tries)
		}
	})
}
