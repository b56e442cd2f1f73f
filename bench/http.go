package bench

// The bench's HTTP clients. An integration's HTTP client runs on its own
// machine, but bench runs it on the same cores as the server and the
// database; what the client spends there is taken from Limbo's share. So
// bench's clients are lean by default: HTTP/1.1 written and read by the
// calling goroutine on one keep-alive connection, with none of
// net/http.Transport's per-connection goroutines and hand-offs (about a
// quarter of the process's CPU per cycle in a profile). `--http-client
// net/http` runs the same cycles through net/http.Client for comparison.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// httpDoer sends one POST with a JSON body and returns the answer's status
// and body, read in full.
type httpDoer interface {
	post(ctx context.Context, path, token, body string) (status int, answer []byte, err error)
	close()
}

const (
	clientLean    = "lean"
	clientNetHTTP = "net/http"
)

// checkHTTPClient refuses a client kind bench does not have.
func checkHTTPClient(kind string) error {
	if kind != clientLean && kind != clientNetHTTP {
		return fmt.Errorf("bench: --http-client %q: want %s or %s", kind, clientLean, clientNetHTTP)
	}
	return nil
}

func newHTTPDoer(kind, base string) (httpDoer, error) {
	if err := checkHTTPClient(kind); err != nil {
		return nil, err
	}
	if kind == clientLean {
		u, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" {
			return nil, fmt.Errorf("bench: the lean client speaks plain http, not %s", u.Scheme)
		}
		return &leanClient{host: u.Host}, nil
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}
	return &netHTTPClient{hc: &http.Client{Timeout: callTimeout, Transport: tr}, base: base}, nil
}

// callTimeout bounds every call, so a stuck server fails the run instead of
// hanging it.
const callTimeout = 30 * time.Second

// netHTTPClient is net/http.Client with one keep-alive connection.
type netHTTPClient struct {
	hc   *http.Client
	base string
}

func (c *netHTTPClient) post(ctx context.Context, path, token, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, data, err
}

func (c *netHTTPClient) close() { c.hc.CloseIdleConnections() }

// leanClient is HTTP/1.1 on one keep-alive connection, dialled on first use
// and again after the server closes it. It is not safe for concurrent use:
// each bench client has its own.
type leanClient struct {
	host string // host:port
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	stop func() bool // stops the context watch of the current connection
	used bool        // the current connection has carried an answer
}

func (c *leanClient) post(ctx context.Context, path, token, body string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	for {
		if c.conn == nil {
			conn, err := (&net.Dialer{Timeout: callTimeout}).DialContext(ctx, "tcp", c.host)
			if err != nil {
				return 0, nil, err
			}
			c.conn, c.br, c.bw = conn, bufio.NewReader(conn), bufio.NewWriter(conn)
			// A cancelled run unblocks a call in flight.
			c.stop = context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
		}
		reused := c.used
		status, data, err := c.roundTrip(path, token, body)
		if err == nil {
			return status, data, nil
		}
		c.close()
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		// A server may close a keep-alive connection it holds idle just as
		// the request goes out; it never read the request, so it is sent
		// again on a new connection. Any other failure is the run's.
		if !reused || !errors.Is(err, errClosedIdle) {
			return 0, nil, err
		}
	}
}

// errClosedIdle says a reused connection ended before any byte of the
// answer arrived.
var errClosedIdle = errors.New("bench: the server closed the idle connection")

func (c *leanClient) roundTrip(path, token, body string) (int, []byte, error) {
	if err := c.conn.SetDeadline(time.Now().Add(callTimeout)); err != nil {
		return 0, nil, err
	}
	w := c.bw
	w.WriteString("POST ")
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(c.host)
	w.WriteString("\r\nAuthorization: Bearer ")
	w.WriteString(token)
	w.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n\r\n")
	w.WriteString(body)
	if err := w.Flush(); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errClosedIdle, err)
	}
	if _, err := c.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w: %w", errClosedIdle, err)
		}
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, nil, err
	}
	c.used = true
	if resp.Close {
		c.close()
	}
	return resp.StatusCode, data, nil
}

func (c *leanClient) close() {
	if c.conn == nil {
		return
	}
	c.stop()
	c.conn.Close()
	c.conn, c.br, c.bw, c.stop, c.used = nil, nil, nil, nil, false
}
