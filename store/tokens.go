package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// tokenPrefix marks Limbo API tokens so they are recognisable in logs and
// secret scanners.
const tokenPrefix = "limbo_"

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

const (
	/* Store.CreateToken */
	insertToken = `INSERT INTO api_tokens (id, tenant, name, token_hash, created_at, created_by, form_id) VALUES (?, ?, ?, ?, ?, ?, ?)`
	/* Store.CreateTokenOnce */
	selectTokenByForm = `SELECT id, tenant, name, created_at FROM api_tokens WHERE form_id = ?`
	/* Store.TenantForToken */
	selectTokenTenant = `SELECT id, tenant, name, created_by FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL`
)

// CheckNewToken checks a token's tenant and name as CreateToken does, for
// a caller that checks its input before it opens the database (limbo token
// create), and returns the tenant as stored.
func CheckNewToken(tenant, name string) (string, error) {
	tenant, err := review.NormalizeTenant(tenant)
	if err != nil {
		return "", err
	}
	// The name is how admins tell tokens apart (and what a revocation
	// names): stored trimmed, never blank.
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("%w: field \"name\": required", review.ErrInvalid)
	}
	if err := review.CheckText("name", review.Identifier, review.MaxFieldLen, name); err != nil {
		return "", err
	}
	return tenant, nil
}

// CreateToken creates an API token for tenant (creating the tenant if new)
// on behalf of by, an admin holding that tenant, and returns it. Only its
// hash is stored: this is the one time it is seen.
func (s *Store) CreateToken(ctx context.Context, by review.Principal, tenant, name string) (string, error) {
	return s.CreateTokenOnce(ctx, by, tenant, name, "")
}

// TokenFormSentTwice is CreateTokenOnce's refusal of a form that made a
// token already: the token it made.
type TokenFormSentTwice struct {
	ID        string    `db:"id"`
	Tenant    string    `db:"tenant"`
	Name      string    `db:"name"`
	CreatedAt time.Time `db:"created_at"`
}

func (e *TokenFormSentTwice) Error() string {
	return fmt.Sprintf("%v: this form was sent already: it created the token %s of tenant %s, whose value was shown then, once; "+
		"if it was lost, revoke that token and create another", review.ErrConflict, e.Name, e.Tenant)
}

// Unwrap makes the refusal a review.ErrConflict.
func (e *TokenFormSentTwice) Unwrap() error { return review.ErrConflict }

// CreateTokenOnce is CreateToken for the console's form, whose formID
// (made when the page was drawn; "" for none) makes one token at most:
// the form sent again (a reload of the page that showed the new token, a
// double click) is a *TokenFormSentTwice naming the token it made, where
// it made a second live token that nobody held.
func (s *Store) CreateTokenOnce(ctx context.Context, by review.Principal, tenant, name, formID string) (string, error) {
	if err := review.CheckText("form_id", review.Identifier, 64, formID); err != nil {
		return "", err
	}
	tenant, err := CheckNewToken(tenant, name)
	if err != nil {
		return "", err
	}
	name = strings.TrimSpace(name)

	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := tokenPrefix + hex.EncodeToString(raw[:])
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		by, err := s.administering(ctx, tx, by, tenant)
		if err != nil {
			return err
		}
		if formID != "" {
			if err := s.tokenFormUnused(ctx, tx, formID); err != nil {
				return err
			}
		}
		now := s.now()
		if err := s.ensureTenant(ctx, tx, tenant, now); err != nil {
			return err
		}
		id := newID("tok_", now)
		var form any
		if formID != "" {
			form = formID
		}
		if _, err := tx.ExecContext(ctx, s.rebind(insertToken), id, tenant, name, hashToken(token), now, by.Name, form); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: tenant, Action: "token.created",
			Detail: detailJSON(map[string]any{"token_id": id, "name": name})})
	})
	if isUnique(err) && formID != "" {
		// The same form sent twice at once: the other send made the token.
		err = s.tokenFormUnused(ctx, s.db, formID)
	}
	var twice *TokenFormSentTwice
	if errors.Is(err, review.ErrForbidden) || errors.As(err, &twice) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("store.CreateToken: %w", err)
	}
	return token, nil
}

// tokenFormUnused is nil while no token was made by the form formID, else
// the *TokenFormSentTwice naming it.
func (s *Store) tokenFormUnused(ctx context.Context, q sqlx.QueryerContext, formID string) error {
	var t TokenFormSentTwice
	err := sqlx.GetContext(ctx, q, &t, s.rebind(selectTokenByForm), formID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return &t
}

// TokenInfo is what a valid token says about its bearer.
type TokenInfo struct {
	ID     string `db:"id"`
	Tenant string `db:"tenant"`
	Name   string `db:"name"`
	// CreatedBy is who created the token (an admin's email, or the
	// operator's name): the person answerable for what it registers.
	CreatedBy string `db:"created_by"`
}

// TenantForToken resolves a bearer token; unknown or revoked tokens are
// review.ErrNotFound. A valid token is remembered for tokenTTL, so the
// integration's hot path does not look it up on every call: a token revoked
// through this store stops at once, one revoked through another instance
// within tokenTTL.
func (s *Store) TenantForToken(ctx context.Context, token string) (*TokenInfo, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, review.ErrNotFound
	}
	h := hashToken(token)
	if ti := s.tokens.get(h, s.clock()); ti != nil {
		return ti, nil
	}
	// Taken before the read: a revocation that commits after the read and
	// before the put must not see its token cached again as valid.
	gen := s.tokens.generation()
	var ti TokenInfo
	err := s.get(ctx, nil, &ti, selectTokenTenant, h)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.TenantForToken: %w", err)
	}
	s.tokens.put(h, &ti, gen, s.clock())
	s.tenants.Store(ti.Tenant, struct{}{})
	return &ti, nil
}

// tokenTTL is how long a resolved token is trusted without asking the
// database again: the longest a revocation on another instance takes.
const tokenTTL = time.Second

// tokenCache remembers recently resolved tokens by hash.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
	// revoked counts the revocations made through this store: a lookup
	// that read the database before one of them caches nothing.
	revoked uint64
}

type cachedToken struct {
	info    TokenInfo
	expires time.Time
}

func (c *tokenCache) get(hash string, now time.Time) *TokenInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[hash]
	if !ok || !now.Before(t.expires) {
		return nil
	}
	ti := t.info
	return &ti
}

// generation is the count of revocations so far, for put.
func (c *tokenCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revoked
}

// put caches a token read from the database while the count of
// revocations was gen; if one has happened since, the read may predate
// it and the token is not cached (the next lookup reads again).
func (c *tokenCache) put(hash string, ti *TokenInfo, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.revoked {
		return
	}
	if c.m == nil || len(c.m) >= 10000 {
		c.m = map[string]cachedToken{} // bounded: start over rather than track age
	}
	c.m[hash] = cachedToken{info: *ti, expires: now.Add(tokenTTL)}
}

// forget drops a token (by id) at once: it was revoked here.
func (c *tokenCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revoked++
	for h, t := range c.m {
		if t.info.ID == id {
			delete(c.m, h)
		}
	}
}
