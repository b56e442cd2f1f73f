package handlers

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultBodyTimeout is how long a client may take to send a request's
// body: a full 16 MiB batch at 300 KB/s.
const DefaultBodyTimeout = time.Minute

// bodyDeadline gives a request's body BodyTimeout to arrive, so a client
// that trickles a body cannot hold a connection, a goroutine and what it
// has sent so far for ever. net/http offers only a server-wide ReadTimeout,
// which would also cut the console's event streams, so the deadline is set
// per request that has a body. net/http clears it once the body is read to
// its end (when it starts reading behind the request), so a handler may
// then take as long as it needs; a body left unread keeps it until the
// next request on the connection sets its own.
func (h *Handlers) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		timeout := cmp.Or(h.BodyTimeout, DefaultBodyTimeout)
		// An error: not served over a connection (a test's recorder), and
		// nothing to bound; the body's errors are still the client's.
		_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(timeout))
		r.Body = &clientBody{ReadCloser: r.Body, timeout: timeout}
		return next(c)
	}
}

// clientBody turns a failed read of a request's body into the client's
// error, not the server's.
type clientBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err: err, timeout: b.timeout}
	}
	return n, err
}

// bodyError is a request body that could not be read: it did not arrive
// in time (408), or it ended before its declared length or was malformed
// (400). Either way it is the client's doing, and nothing was changed.
type bodyError struct {
	err     error
	timeout time.Duration
}

func (e *bodyError) Error() string {
	if e.timedOut() {
		return fmt.Sprintf("the request body did not arrive within %s", e.timeout)
	}
	return "the request body could not be read: " + e.err.Error()
}

func (e *bodyError) Unwrap() error { return e.err }

func (e *bodyError) timedOut() bool { return errors.Is(e.err, os.ErrDeadlineExceeded) }

func (e *bodyError) status() int {
	if e.timedOut() {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

func (e *bodyError) problem() *Problem {
	if e.timedOut() {
		return &Problem{Type: "request-timeout", Title: "Request body too slow", Status: e.status(),
			Detail: e.Error() + "; nothing was changed"}
	}
	return &Problem{Type: "invalid-request", Title: "Invalid request", Status: e.status(), Detail: e.Error()}
}
