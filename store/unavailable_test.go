package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/lib/pq"

	"github.com/limbo-dev/limbo/review"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("store.GetOperation: %w", refused), true},
		{"bad connection", fmt.Errorf("store.WithTx: begin: %w", driver.ErrBadConn), true},
		{"connection done", sql.ErrConnDone, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"admin shutdown", &pq.Error{Code: "57P01"}, true},
		{"cannot connect now", fmt.Errorf("x: %w", &pq.Error{Code: "57P03"}), true},
		{"too many connections", &pq.Error{Code: "53300"}, true},
		{"connection failure", &pq.Error{Code: "08006"}, true},
		{"unique violation", &pq.Error{Code: "23505"}, false},
		{"invalid text", &pq.Error{Code: "22021"}, false},
		{"no rows", sql.ErrNoRows, false},
		{"invalid input", review.ErrInvalid, false},
		{"plain", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
