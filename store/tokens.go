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
	insertToken = `INSERT INTO api_tokens (id, tenant, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`
	/* Store.TenantForToken */
	selectTokenTenant = `SELECT id, tenant, name FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL`
)

// CreateToken creates an API token for tenant (creating the tenant if new)
// and returns it. Only its hash is stored: this is the one time it is seen.
func (s *Store) CreateToken(ctx context.Context, tenant, name, actor string) (string, error) {
	tenant = strings.TrimSpace(tenant)
	if tenant == "" || len(tenant) > review.MaxFieldLen || strings.ContainsAny(tenant, ",*\n\r\t") {
		return "", fmt.Errorf("%w: tenant must be 1–%d characters without commas, '*' or control characters", review.ErrInvalid, review.MaxFieldLen)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := tokenPrefix + hex.EncodeToString(raw[:])
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		if err := s.ensureTenant(ctx, tx, tenant, now); err != nil {
			return err
		}
		id := newID("tok_", now)
		if _, err := tx.ExecContext(ctx, s.rebind(insertToken), id, tenant, name, hashToken(token), now); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: tenant, Action: "token.created",
			Detail: detailJSON(map[string]any{"token_id": id, "name": name})})
	})
	if err != nil {
		return "", fmt.Errorf("store.CreateToken: %w", err)
	}
	return token, nil
}

// TokenInfo is what a valid token says about its bearer.
type TokenInfo struct {
	ID     string `db:"id"`
	Tenant string `db:"tenant"`
	Name   string `db:"name"`
}

// TenantForToken resolves a bearer token; unknown or revoked tokens are
// review.ErrNotFound.
func (s *Store) TenantForToken(ctx context.Context, token string) (*TokenInfo, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, review.ErrNotFound
	}
	var ti TokenInfo
	err := s.db.GetContext(ctx, &ti, s.rebind(selectTokenTenant), hashToken(token))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.TenantForToken: %w", err)
	}
	return &ti, nil
}
