package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/netip"
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

// Login throttling. Failures are counted over a sliding window, per account
// × address, per address and per account, so that guessing stays slow and
// an attacker's failures do not lock anyone else out:
//
//   - one address guessing one account waits pairDelay after its own last
//     failure there, and is refused after maxPairFailures. These count only
//     that pair's failures: the owner's typo is not made costlier by an
//     attacker failing on the same account elsewhere.
//   - one address guessing many accounts is refused after
//     maxAddressFailures;
//   - many addresses guessing one account are refused after
//     maxAccountFailures.
//
// A browser that signed in to an account holds a device token for it (a
// cookie, LoginWithDevice; OWASP's "device cookies"). Signing in to that
// account with it, only the token's own failures count, under the account
// × address's limits (rule "device" for the refusal): the address's limit,
// the account's ceiling and the pair's failures made without the token do
// not refuse it. So colleagues behind one office NAT or IPv6 /64 keep
// signing in while someone there fails on other accounts or on theirs,
// and the owner keeps signing in while an attacker fails on their account
// from many addresses; a browser without the token (a new one, or the
// attacker's) waits the attack out. The token's failures count for nothing
// else. A token is honoured for deviceFor after its last sign-in, for the
// account it was issued to only. Being a secret the browser holds, not an
// address anyone can share, it also keeps an address over its limit from
// telling whether an account signed in from there (an exemption by
// address did).
//
// Guessing stays bounded: per window, an account takes at most
// maxAccountFailures guesses without a token plus maxPairFailures per
// browser it signed in with, and an address at most maxAddressFailures
// without one.
//
// A refused attempt checks no password and is not counted as a failure (so
// hammering a refused door does not keep it shut longer); a success clears
// the failures of its account × address made without a token, or those of
// its token (the attacker's failures on other accounts stay counted).
const (
	// throttleWindow is how long a failure counts.
	throttleWindow = 15 * time.Minute
	// loginGateWait: how long a sign-in waits for another one on the same
	// account or address to finish before it is answered "try again in 1 s".
	loginGateWait = 5 * time.Second
	// maxPairFailures: failures of one address on one account in the window
	// (or of one device token) before it is refused until the oldest ages
	// out.
	maxPairFailures = 5
	// maxAddressFailures: failures of one address, any account, in the
	// window before the address is refused.
	maxAddressFailures = 20
	// maxAccountFailures: failures on one account, any address, in the
	// window before it is refused.
	maxAccountFailures = 50
	// delayAfter: once an account × address has this many failures in the
	// window, it waits pairDelay after its last one before it may try again.
	delayAfter = 3
	// deviceFor is how long a device token is honoured after the last
	// sign-in with it.
	deviceFor = 30 * 24 * time.Hour
)

// DeviceTokenLife is how long a device token is honoured after the last
// sign-in with it: the cookie that holds it lives as long.
const DeviceTokenLife = deviceFor

// pairDelay is how long an account × address with f failures in the window
// waits after its last one: 1 s at delayAfter, doubling with each further
// failure (maxPairFailures refuses the pair before it grows long); none
// below delayAfter.
func pairDelay(f int) time.Duration {
	if f < delayAfter {
		return 0
	}
	return time.Duration(1<<min(f-delayAfter, 20)) * time.Second
}

// throttleWait decides whether a sign-in may go ahead at now. pair, addr
// and acct are the window's failures of this account × address, of this
// address and of this account, newest first, at most maxPairFailures,
// maxAddressFailures and maxAccountFailures of them (for a sign-in with a
// device token: the token's own as pair, none as addr and acct). It
// returns how long to wait (0: go ahead) and which rule refused.
func throttleWait(now time.Time, pair, addr, acct []time.Time) (time.Duration, string) {
	var wait time.Duration
	var rule string
	refuse := func(until time.Time, why string) {
		if d := until.Sub(now); d > wait {
			wait, rule = d, why
		}
	}
	// The n-th newest failure is the one that must age out before fewer than
	// n remain in the window.
	if len(pair) >= maxPairFailures {
		refuse(pair[maxPairFailures-1].Add(throttleWindow), "account_address")
	}
	if len(pair) > 0 {
		refuse(pair[0].Add(pairDelay(len(pair))), "delay")
	}
	if len(addr) >= maxAddressFailures {
		refuse(addr[maxAddressFailures-1].Add(throttleWindow), "address")
	}
	if len(acct) >= maxAccountFailures {
		refuse(acct[maxAccountFailures-1].Add(throttleWindow), "account")
	}
	return wait, rule
}

// throttleAddr is the address a failure is counted against: an IPv4
// address as it is, an IPv6 address as its /64 — one subscriber's network,
// in which anyone can pick a fresh address for every try. (The audit trail
// records the full address.)
func throttleAddr(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if ip = ip.Unmap(); ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}

// ThrottledError: too many failed sign-ins; try again after RetryAfter.
type ThrottledError struct{ RetryAfter time.Duration }

// Seconds is RetryAfter in whole seconds, rounded up (at least 1), as a
// Retry-After header gives it.
func (e *ThrottledError) Seconds() int {
	return max(1, int((e.RetryAfter+time.Second-1)/time.Second))
}

func (e *ThrottledError) Error() string {
	n, unit := e.Seconds(), "second"
	if n > 60 {
		n, unit = (n+59)/60, "minute"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("Too many failed sign-ins. Try again in %d %s.", n, unit)
}

// ErrBadCredentials: unknown email, wrong password or disabled user — one
// answer for all three, so sign-in does not reveal which accounts exist.
var ErrBadCredentials = errors.New("wrong email or password")

// dummyHash is compared against when the email is unknown, so the answer
// takes as long as for a known one.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("limbo-dummy-password"), BcryptCost)

const (
	/* Store.Login: this account × address's failures in the window, newest first. */
	selectPairFailures = `SELECT at FROM login_failures WHERE account = ? AND addr = ? AND device = '' AND at > ? ORDER BY at DESC LIMIT ?`
	/* Store.Login: this address's failures in the window, any account, newest first. */
	selectAddrFailures = `SELECT at FROM login_failures WHERE addr = ? AND device = '' AND at > ? ORDER BY at DESC LIMIT ?`
	/* Store.Login: this account's failures in the window, any address, newest first. */
	selectAccountFailures = `SELECT at FROM login_failures WHERE account = ? AND device = '' AND at > ? ORDER BY at DESC LIMIT ?`
	/* Store.Login: this device token's failures in the window, newest first. */
	selectDeviceFailures = `SELECT at FROM login_failures WHERE device = ? AND at > ? ORDER BY at DESC LIMIT ?`
	/* Store.Login: the account a device token was issued for, while honoured. */
	selectDevice = `SELECT account FROM login_devices WHERE token_hash = ? AND last_at > ?`
	/* Store.Login: a success with a device token keeps it honoured. */
	touchDevice = `UPDATE login_devices SET last_at = ? WHERE token_hash = ?`
	/* Store.Login: a success without one issues one. */
	insertDevice = `INSERT INTO login_devices (token_hash, account, last_at) VALUES (?, ?, ?)`
	/* Store.Login: tokens no longer honoured. */
	pruneDevices = `DELETE FROM login_devices WHERE last_at <= ?`
	/* Store.Login: a success with a device token clears its failures. */
	clearDeviceFailures = `DELETE FROM login_failures WHERE device = ?`
	/* Store.Login */
	insertFailure = `INSERT INTO login_failures (account, addr, at, device) VALUES (?, ?, ?, ?)`
	/* Store.Login: failures that no longer count. */
	pruneFailures = `DELETE FROM login_failures WHERE at <= ?`
	/* Store.Login: a success clears its account × address. */
	clearPairFailures = `DELETE FROM login_failures WHERE account = ? AND addr = ? AND device = ''`
	/* Store.recordRefusal: one more refusal in the scope's live period,
	counted by the database, so instances refusing at once do not write
	over each other's count. */
	countThrottle = `UPDATE login_throttles SET refusals = refusals + 1, ends_at = CASE WHEN ends_at < ? THEN ? ELSE ends_at END
WHERE scope = ? AND ends_at > ? RETURNING since, refusals`
	/* Store.recordRefusal: refusal periods that are over. */
	pruneThrottles = `DELETE FROM login_throttles WHERE ends_at <= ?`
	/* Store.recordRefusal: a new period, unless another instance started
	one since the count found none (then nothing is written). */
	startThrottle = `INSERT INTO login_throttles (scope, rule, since, ends_at, refusals) VALUES (?, ?, ?, ?, 1)
ON CONFLICT (scope) DO UPDATE SET rule = excluded.rule, since = excluded.since, ends_at = excluded.ends_at, refusals = 1
WHERE login_throttles.ends_at <= excluded.since`
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
// the cookie. addr is the client's address (the handler's c.RealIP()).
// Every success, failure and refusal is audited; failures are throttled
// (see throttleWait): a refused attempt is a *ThrottledError, whatever the
// password. An email no account can have is review.ErrInvalid.
func (s *Store) Login(ctx context.Context, email, password, addr string, pol SessionPolicy) (string, *Session, error) {
	id, sess, _, err := s.LoginWithDevice(ctx, email, password, addr, "", pol)
	return id, sess, err
}

// LoginWithDevice is Login from a browser that may hold a device token
// for the account (device; "" when it holds none): one a sign-in to this
// account with that browser was given, in the last deviceFor. With it,
// only that token's own failures are counted (loginWait): failures made
// without it — an attacker's at the same address, behind one office NAT
// — do not refuse the browser its owner signs in with, nor do its own
// count against anyone else. A success returns the token the browser is
// to hold from now on: the one it presented, or a new one.
func (s *Store) LoginWithDevice(ctx context.Context, email, password, addr, device string, pol SessionPolicy) (string, *Session, string, error) {
	if err := review.CheckText("email", review.Identifier, MaxEmailLen, email); err != nil {
		// No account has such an address (AddUser holds them to it), so
		// nothing is checked, counted or audited. PostgreSQL cannot store
		// NUL or invalid UTF-8: such an email failed the sign-in with an
		// error there, where SQLite answered "wrong email or password"
		// (the console's form check stops them before; other callers
		// get the same answer from both engines).
		return "", nil, "", fmt.Errorf("store.Login: %w", err)
	}
	pol = pol.withDefaults()
	now := s.now()
	acct, from := normEmail(email), throttleAddr(addr)
	// One check at a time per account and per address, up to its recorded
	// outcome (gate.go); a request that waits longer than loginGateWait is
	// told to come back rather than queue without end. The address's gate
	// first: a flood of requests from one address queues there, and holds
	// the account's gate one request at a time, so the owner signing in
	// from elsewhere waits for one of them, not behind all.
	gctx, cancel := context.WithTimeout(ctx, loginGateWait)
	defer cancel()
	for _, key := range []string{"addr:" + from, "acct:" + acct} {
		leave, err := s.enterLoginGate(gctx, key)
		if err != nil {
			if ctx.Err() != nil {
				return "", nil, "", ctx.Err()
			}
			if gctx.Err() == nil {
				return "", nil, "", fmt.Errorf("store.Login: %w", err) // the database's
			}
			// Counted for the metric, not audited: nothing was checked,
			// and a flood would write an event a request.
			s.countRefusal(RefusedBusy)
			return "", nil, "", &ThrottledError{RetryAfter: time.Second}
		}
		defer leave()
	}
	now = s.now() // after the wait: the checks below are as of now
	// The device token counts only for the account it was issued for.
	dev, err := s.honouredDevice(ctx, acct, device, now)
	if err != nil {
		return "", nil, "", fmt.Errorf("store.Login: %w", err)
	}
	wait, rule, err := s.loginWait(ctx, acct, from, dev, now)
	if err != nil {
		return "", nil, "", fmt.Errorf("store.Login: %w", err)
	}
	if wait > 0 {
		th := &ThrottledError{RetryAfter: wait}
		s.countRefusal(rule)
		err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
			return s.recordRefusal(ctx, tx, rule, acct, addr, dev, now, th)
		})
		if err != nil {
			return "", nil, "", fmt.Errorf("store.Login: %w", err)
		}
		return "", nil, "", th
	}
	u, err := s.UserByEmail(ctx, email)
	hash := dummyHash
	if err == nil {
		hash = []byte(u.PasswordHash)
	} else if !errors.Is(err, review.ErrNotFound) {
		return "", nil, "", err
	}
	match := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if err != nil || !match || u.DisabledAt != nil {
		err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, s.rebind(pruneFailures), now.Add(-throttleWindow)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.rebind(insertFailure), acct, from, now, dev); err != nil {
				return err
			}
			detail := map[string]any{"email": acct, "addr": addr}
			if dev != "" {
				// From a browser that signed in to this account before: a
				// typo more likely than a guess, for whoever reads the trail.
				detail["known_browser"] = true
			}
			ev := &AuditEvent{At: now, Actor: "anonymous@" + addr, Action: "login.failed", Detail: detailJSON(detail)}
			if u != nil {
				// A guess at a known account: its tenants' managers read it.
				return s.appendUserEvent(ctx, tx, ev, u.Scope())
			}
			return s.appendEvent(ctx, tx, ev)
		})
		if err != nil {
			return "", nil, "", fmt.Errorf("store.Login: %w", err)
		}
		return "", nil, "", ErrBadCredentials
	}
	id := randomToken()
	sess := &Session{User: u, CSRFToken: randomToken(), ExpiresAt: now.Add(pol.Absolute)}
	var token string
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, s.rebind(clearPairFailures), acct, from); err != nil {
			return err
		}
		t, err := s.keepDevice(ctx, tx, acct, device, dev, now)
		if err != nil {
			return err
		}
		token = t
		if _, err := tx.ExecContext(ctx, s.rebind(insertSession), hashSessionID(id), u.ID, sess.CSRFToken, now, now, sess.ExpiresAt); err != nil {
			return err
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{At: now, Actor: u.Email, Action: "login.succeeded",
			Detail: detailJSON(map[string]any{"user_id": u.ID, "addr": addr})}, u.Scope())
	})
	if err != nil {
		return "", nil, "", fmt.Errorf("store.Login: %w", err)
	}
	return id, sess, token, nil
}

// throttleScope is what a rule refuses: the account × address, the
// address or the account, or the device token (dev, its hash) a sign-in
// came with; a refusal period is counted per scope.
func throttleScope(rule, acct, from, dev string) string {
	if dev != "" {
		return "device:" + dev
	}
	switch rule {
	case "address":
		return "addr:" + from
	case "account":
		return "acct:" + acct
	}
	return "pair:" + acct + " " + from
}

// recordRefusal counts a refused sign-in in its scope's refusal period
// (login_throttles). The audit trail gets the period's first refusal
// (login.throttled) and its 10th, 100th, 1000th… (login.still_throttled,
// with the count so far), not one event per refused request: anyone can
// send sign-ins, and the trail is append-only and kept for years. A new
// period starts only once the last one's wait is over, which takes a
// failure the throttle let through, so the events stay bounded by the
// failures the throttle allows.
func (s *Store) recordRefusal(ctx context.Context, tx *sqlx.Tx, rule, acct, addr, dev string, now time.Time, th *ThrottledError) error {
	scope := throttleScope(rule, acct, throttleAddr(addr), dev)
	now, ends := dbTime(now), dbTime(now.Add(th.RetryAfter))
	detail := map[string]any{"email": acct, "addr": addr, "rule": rule, "retry_after_s": th.Seconds()}
	// Counted into the live period; else a new one started; else another
	// instance started it in between, and this refusal counts into it.
	for range 2 {
		var p struct {
			Since    time.Time `db:"since"`
			Refusals int64     `db:"refusals"`
		}
		err := tx.GetContext(ctx, &p, s.rebind(countThrottle), ends, ends, scope, now)
		if err == nil {
			if !isPowerOf10(p.Refusals) {
				return nil
			}
			detail["since"], detail["refusals"] = p.Since.UTC(), p.Refusals
			return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: "anonymous@" + addr, Action: "login.still_throttled", Detail: detailJSON(detail)})
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// A new period: the ones that are over are of no more use.
		if _, err := tx.ExecContext(ctx, s.rebind(pruneThrottles), now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.rebind(startThrottle), scope, rule, now, ends)
		if err != nil {
			return err
		}
		if rowsAffected(res) == 1 {
			return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: "anonymous@" + addr, Action: "login.throttled", Detail: detailJSON(detail)})
		}
	}
	return fmt.Errorf("login throttle %s: neither counted nor started", scope)
}

// isPowerOf10: 10, 100, 1000… (1 is the period's start, audited as such).
func isPowerOf10(n int64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// countRefusal counts a refused sign-in by rule, for limbo_login_refusals_total.
func (s *Store) countRefusal(rule string) {
	s.refusalsMu.Lock()
	defer s.refusalsMu.Unlock()
	if s.refusals == nil {
		s.refusals = map[string]int64{}
	}
	s.refusals[rule]++
}

// RefusedBusy is why a sign-in is refused that waited longer than
// loginGateWait for another on its account or address to be checked.
const RefusedBusy = "busy"

// ThrottleRules are the rules a sign-in may be refused by (throttleWait),
// and RefusedBusy.
func ThrottleRules() []string {
	return []string{"account_address", "delay", "address", "account", "device", RefusedBusy}
}

// LoginRefusals is how many sign-ins this store refused, by rule.
func (s *Store) LoginRefusals() map[string]int64 {
	s.refusalsMu.Lock()
	defer s.refusalsMu.Unlock()
	return maps.Clone(s.refusals)
}

// loginWait reads the window's failures for acct at addr and asks
// throttleWait how long this attempt must wait.
// With a device token honoured for acct (dev, its hash), only that
// token's failures count, under the account × address's limits: it
// waits after its third, and is refused after maxPairFailures (rule
// "device") until they age out.
func (s *Store) loginWait(ctx context.Context, acct, addr, dev string, now time.Time) (time.Duration, string, error) {
	since := now.Add(-throttleWindow)
	if dev != "" {
		var mine []time.Time
		if err := s.db.SelectContext(ctx, &mine, s.rebind(selectDeviceFailures), dev, since, maxPairFailures); err != nil {
			return 0, "", err
		}
		wait, rule := throttleWait(now, mine, nil, nil)
		if rule == "account_address" {
			rule = "device"
		}
		return wait, rule, nil
	}
	var pair, byAddr, byAcct []time.Time
	if err := s.db.SelectContext(ctx, &pair, s.rebind(selectPairFailures), acct, addr, since, maxPairFailures); err != nil {
		return 0, "", err
	}
	if err := s.db.SelectContext(ctx, &byAddr, s.rebind(selectAddrFailures), addr, since, maxAddressFailures); err != nil {
		return 0, "", err
	}
	if err := s.db.SelectContext(ctx, &byAcct, s.rebind(selectAccountFailures), acct, since, maxAccountFailures); err != nil {
		return 0, "", err
	}
	wait, rule := throttleWait(now, pair, byAddr, byAcct)
	return wait, rule, nil
}

// honouredDevice is the hash of device, the token a browser presented,
// when it was issued for acct and is still honoured (signed in with in
// the last deviceFor); "" otherwise, and for no token. Only the hash is
// stored or compared: the token is a password for the throttle.
func (s *Store) honouredDevice(ctx context.Context, acct, device string, now time.Time) (string, error) {
	if device == "" {
		return "", nil
	}
	h := hashSessionID(device)
	var owner string
	err := s.db.GetContext(ctx, &owner, s.rebind(selectDevice), h, now.Add(-deviceFor))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", err
	case owner != acct:
		return "", nil // another account's: a browser shared, or a guesser's own
	}
	return h, nil
}

// keepDevice, at a successful sign-in to acct, gives the browser the
// device token it is to hold: the one it presented when honoured (dev,
// its hash: its failures cleared, its time renewed), else a new one.
// Tokens no longer honoured are pruned.
func (s *Store) keepDevice(ctx context.Context, tx *sqlx.Tx, acct, device, dev string, now time.Time) (string, error) {
	if _, err := tx.ExecContext(ctx, s.rebind(pruneDevices), now.Add(-deviceFor)); err != nil {
		return "", err
	}
	if dev != "" {
		if _, err := tx.ExecContext(ctx, s.rebind(clearDeviceFailures), dev); err != nil {
			return "", err
		}
		_, err := tx.ExecContext(ctx, s.rebind(touchDevice), now, dev)
		return device, err
	}
	token := randomToken()
	_, err := tx.ExecContext(ctx, s.rebind(insertDevice), hashSessionID(token), acct, now)
	return token, err
}

// Session resolves a cookie's session id. Ended, expired (absolute), idle
// or disabled-user sessions are review.ErrNotFound.
func (s *Store) Session(ctx context.Context, id string, pol SessionPolicy) (*Session, error) {
	return s.session(ctx, id, pol, true)
}

// SessionLive is Session without counting as use: a stream of live
// updates checks its session is still live with it, and an open tab
// does not keep an idle session alive.
func (s *Store) SessionLive(ctx context.Context, id string, pol SessionPolicy) (*Session, error) {
	return s.session(ctx, id, pol, false)
}

func (s *Store) session(ctx context.Context, id string, pol SessionPolicy, use bool) (*Session, error) {
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
	if use && now.Sub(row.LastSeen) > time.Minute {
		if _, err := s.db.ExecContext(ctx, s.rebind(touchSession), now, hashSessionID(id)); err != nil {
			return nil, fmt.Errorf("store.Session: %w", err)
		}
	}
	return &Session{User: u, CSRFToken: row.CSRF, ExpiresAt: row.Expires.UTC()}, nil
}

// Logout ends the session at once: the cookie, even copied, is dead. by
// is its user, whose tenants' managers read the event.
func (s *Store) Logout(ctx context.Context, id string, by review.Principal) error {
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, s.rebind(endSession), s.now(), hashSessionID(id))
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return nil
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{Actor: by.Name, Action: "logout"}, by.Scope)
	})
}

func normEmail(e string) string {
	if a, err := mailAddress(e); err == nil {
		return a
	}
	return e
}
