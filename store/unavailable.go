package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsUnavailable reports whether err means the database cannot be reached
// or cannot take the work right now — nothing was committed and the same
// call may succeed a moment later — as opposed to a query that is wrong.
// The API answers these 503 with Retry-After rather than 500.
//
// It is one classification over the error chain rather than a sentinel
// wrapped in at the runner and WithTx: many store methods read straight
// from the pool (s.db), and every one of their errors reaches the caller
// with its cause wrapped by %w, so classifying the chain at the answer
// covers them all without a wrapper at each call.
//
//   - the pool or the driver lost the connection: driver.ErrBadConn,
//     sql.ErrConnDone, a *net.OpError or another net.Error (refused, reset,
//     timed out), ECONNREFUSED/ECONNRESET/EPIPE, an unexpected EOF;
//   - PostgreSQL says it is going away or full: class 08 (connection
//     exception), 57P01 admin_shutdown, 57P02 crash_shutdown,
//     57P03 cannot_connect_now, 53300 too_many_connections;
//   - SQLite is still busy or locked after its busy timeout and WithTx's
//     retries: another process holds the write lock; nothing was written.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var pe *pq.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return pe.Code.Class() == "08"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}
