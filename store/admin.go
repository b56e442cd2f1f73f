package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// ListUsers returns every console user, by email.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	var us []User
	if err := s.db.SelectContext(ctx, &us, `SELECT `+userColumns+` FROM users ORDER BY email`); err != nil {
		return nil, fmt.Errorf("store.ListUsers: %w", err)
	}
	return us, nil
}

const (
	/* Store.UpdateUser */
	updateUser = `UPDATE users SET role = ?, tenants = ?, disabled_at = ?, updated_at = ? WHERE id = ?`
)

// UserChange is an admin's change to a user.
type UserChange struct {
	Role     review.Role
	Scope    review.Scope
	Disabled bool
	Actor    string
}

// UpdateUser changes a user's role, tenants or enablement. Any change ends
// the user's sessions at once, so nobody keeps powers they just lost.
func (s *Store) UpdateUser(ctx context.Context, id string, ch UserChange) (*User, error) {
	if !ch.Role.Valid() {
		return nil, fmt.Errorf("%w: field \"role\": must be reviewer, support, manager or admin", review.ErrInvalid)
	}
	if !ch.Scope.All && len(ch.Scope.Tenants) == 0 {
		return nil, fmt.Errorf("%w: field \"tenants\": give tenants, or * for all", review.ErrInvalid)
	}
	u, err := s.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		var disabled any
		if ch.Disabled {
			disabled = now
			if u.DisabledAt != nil {
				disabled = dbTime(*u.DisabledAt)
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(updateUser), string(ch.Role), ch.Scope.String(), disabled, now, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(endUserSessions), now, id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: ch.Actor, Action: "user.changed",
			Detail: detailJSON(map[string]any{"user_id": id, "email": u.Email, "role": ch.Role, "tenants": ch.Scope.String(),
				"disabled": ch.Disabled, "was": map[string]any{"role": u.Role, "tenants": u.TenantsText, "disabled": u.DisabledAt != nil}})})
	})
	if err != nil {
		return nil, fmt.Errorf("store.UpdateUser: %w", err)
	}
	return s.UserByID(ctx, id)
}

// Token is an API token as admins see it (never the secret).
type Token struct {
	ID        string     `db:"id"`
	Tenant    string     `db:"tenant"`
	Name      string     `db:"name"`
	CreatedAt time.Time  `db:"created_at"`
	RevokedAt *time.Time `db:"revoked_at"`
}

// ListTokens returns the API tokens of the tenants in scope (nil: all).
func (s *Store) ListTokens(ctx context.Context, scope []string) ([]Token, error) {
	q, args := `SELECT id, tenant, name, created_at, revoked_at FROM api_tokens ORDER BY tenant, created_at`, []any{}
	if scope != nil {
		if len(scope) == 0 {
			return nil, nil
		}
		var err error
		q, args, err = sqlx.In(`SELECT id, tenant, name, created_at, revoked_at FROM api_tokens WHERE tenant IN (?) ORDER BY tenant, created_at`, scope)
		if err != nil {
			return nil, err
		}
	}
	var ts []Token
	if err := s.db.SelectContext(ctx, &ts, s.rebind(q), args...); err != nil {
		return nil, fmt.Errorf("store.ListTokens: %w", err)
	}
	return ts, nil
}

// RevokeToken ends an API token at once.
func (s *Store) RevokeToken(ctx context.Context, id string, scope []string, actor string) error {
	defer s.tokens.forget(id) // after the commit, so no lookup can re-cache it as valid
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		var t Token
		if err := tx.GetContext(ctx, &t, s.rebind(`SELECT id, tenant, name, created_at, revoked_at FROM api_tokens WHERE id = ?`), id); err != nil {
			return review.ErrNotFound
		}
		if scope != nil && !slices.Contains(scope, t.Tenant) {
			return review.ErrNotFound
		}
		if t.RevokedAt != nil {
			return nil
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, s.rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), now, id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: t.Tenant, Action: "token.revoked",
			Detail: detailJSON(map[string]any{"token_id": id, "name": t.Name})})
	})
}
