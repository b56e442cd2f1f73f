package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	"github.com/limbo-dev/limbo/review"
)

// SessionPolicy bounds a console session.
type SessionPolicy struct {
	// Idle ends a session not used for this long (default 30 min).
	Idle time.Duration
	// Absolute ends a session this long after sign-in (default 12 h).
	Absolute time.Duration
}

func (p SessionPolicy) withDefaults() SessionPolicy {
	if p.Idle <= 0 {
		p.Idle = 30 * time.Minute
	}
	if p.Absolute <= 0 {
		p.Absolute = 12 * time.Hour
	}
	return p
}

// Session is a signed-in user's server-side session.
type Session struct {
	User      *User
	CSRFToken string
	ExpiresAt time.Time
}

// Login throttling: failures counted over the window, per account and per
// address. Past the limit, sign-in is refused until the window moves on,
// whatever the password.
const (
	throttleWindow     = 15 * time.Minute
	maxAccountFailures = 5
	maxAddressFailures = 20
)

// ThrottledError: too many failed sign-ins; try again after RetryAfter.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed sign-ins; try again in %s", e.RetryAfter.Round(time.Second))
}

// ErrBadCredentials: unknown email, wrong password or disabled user — one
// answer for all three, so sign-in does not reveal which accounts exist.
var ErrBadCredentials = errors.New("wrong email or password")

// dummyHash is compared against when the email is unknown, so the answer
// takes as long as for a known one.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("limbo-dummy-password"), BcryptCost)

const (
	/* Store.Login */
	countFailures = `SELECT COUNT(*) FROM login_failures WHERE key = ? AND at > ?`
	/* Store.Login */
	oldestFailure = `SELECT at FROM login_failures WHERE key = ? AND at > ? ORDER BY at LIMIT 1`
	/* Store.Login */
	insertFailure = `INSERT INTO login_failures (key, at) VALUES (?, ?)`
	/* Store.Login */
	clearFailures = `DELETE FROM login_failures WHERE key = ?`
	/* Store.Login */
	insertSession = `INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`
	/* Store.Session */
	selectSession = `SELECT user_id, csrf_token, last_seen_at, expires_at, ended_at FROM sessions WHERE id_hash = ?`
	/* Store.Session: touched at most once a minute, not on every request. */
	touchSession = `UPDATE sessions SET last_seen_at = ? WHERE id_hash = ? AND ended_at IS NULL`
	/* Store.Logout */
	endSession = `UPDATE sessions SET ended_at = ? WHERE id_hash = ? AND ended_at IS NULL`
	/* Store.endUserSessions */
	endUserSessions = `UPDATE sessions SET ended_at = ? WHERE user_id = ? AND ended_at IS NULL`
)

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Login checks a password and, when it matches an enabled user, starts a
// new session (a fresh id at every sign-in). It returns the session id for
// the cookie. Every success and failure is audited; failures are throttled
// per account and per address.
func (s *Store) Login(ctx context.Context, email, password, addr string, pol SessionPolicy) (string, *Session, error) {
	pol = pol.withDefaults()
	now := s.now()
	acct, ip := "acct:"+normEmail(email), "addr:"+addr
	for _, k := range []struct {
		key   string
		limit int
	}{{acct, maxAccountFailures}, {ip, maxAddressFailures}} {
		var n int
		if err := s.db.GetContext(ctx, &n, s.rebind(countFailures), k.key, now.Add(-throttleWindow)); err != nil {
			return "", nil, fmt.Errorf("store.Login: %w", err)
		}
		if n >= k.limit {
			var oldest sql.NullTime
			_ = s.db.GetContext(ctx, &oldest, s.rebind(oldestFailure), k.key, now.Add(-throttleWindow))
			wait := throttleWindow
			if oldest.Valid {
				wait = oldest.Time.Add(throttleWindow).Sub(now)
			}
			s.auditLogin(ctx, "login.throttled", email, addr, "")
			return "", nil, &ThrottledError{RetryAfter: max(wait, time.Second)}
		}
	}
	u, err := s.UserByEmail(ctx, email)
	hash := dummyHash
	if err == nil {
		hash = []byte(u.PasswordHash)
	} else if !errors.Is(err, review.ErrNotFound) {
		return "", nil, err
	}
	match := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if err != nil || !match || u.DisabledAt != nil {
		err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
			for _, k := range []string{acct, ip} {
				if _, err := tx.ExecContext(ctx, s.rebind(insertFailure), k, now); err != nil {
					return err
				}
			}
			return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: "anonymous@" + addr, Action: "login.failed",
				Detail: detailJSON(map[string]any{"email": normEmail(email), "addr": addr})})
		})
		if err != nil {
			return "", nil, fmt.Errorf("store.Login: %w", err)
		}
		return "", nil, ErrBadCredentials
	}
	id := randomToken()
	sess := &Session{User: u, CSRFToken: randomToken(), ExpiresAt: now.Add(pol.Absolute)}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, s.rebind(clearFailures), acct); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(insertSession), hashSessionID(id), u.ID, sess.CSRFToken, now, now, sess.ExpiresAt); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: u.Email, Action: "login.succeeded",
			Detail: detailJSON(map[string]any{"user_id": u.ID, "addr": addr})})
	})
	if err != nil {
		return "", nil, fmt.Errorf("store.Login: %w", err)
	}
	return id, sess, nil
}

func (s *Store) auditLogin(ctx context.Context, action, email, addr, userID string) {
	_ = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		return s.appendEvent(ctx, tx, &AuditEvent{Actor: "anonymous@" + addr, Action: action,
			Detail: detailJSON(map[string]any{"email": normEmail(email), "addr": addr, "user_id": userID})})
	})
}

// Session resolves a cookie's session id. Ended, expired (absolute), idle
// or disabled-user sessions are review.ErrNotFound.
func (s *Store) Session(ctx context.Context, id string, pol SessionPolicy) (*Session, error) {
	pol = pol.withDefaults()
	var row struct {
		UserID   string       `db:"user_id"`
		CSRF     string       `db:"csrf_token"`
		LastSeen time.Time    `db:"last_seen_at"`
		Expires  time.Time    `db:"expires_at"`
		Ended    sql.NullTime `db:"ended_at"`
	}
	err := s.db.GetContext(ctx, &row, s.rebind(selectSession), hashSessionID(id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.Session: %w", err)
	}
	now := s.now()
	if row.Ended.Valid || !now.Before(row.Expires) || now.Sub(row.LastSeen) >= pol.Idle {
		return nil, review.ErrNotFound
	}
	u, err := s.UserByID(ctx, row.UserID)
	if err != nil || u.DisabledAt != nil {
		return nil, review.ErrNotFound
	}
	if now.Sub(row.LastSeen) > time.Minute {
		if _, err := s.db.ExecContext(ctx, s.rebind(touchSession), now, hashSessionID(id)); err != nil {
			return nil, fmt.Errorf("store.Session: %w", err)
		}
	}
	return &Session{User: u, CSRFToken: row.CSRF, ExpiresAt: row.Expires.UTC()}, nil
}

// Logout ends the session at once: the cookie, even copied, is dead.
func (s *Store) Logout(ctx context.Context, id, actor string) error {
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, s.rebind(endSession), s.now(), hashSessionID(id))
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return nil
		}
		return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Action: "logout"})
	})
}

func normEmail(e string) string {
	if a, err := mailAddress(e); err == nil {
		return a
	}
	return e
}
