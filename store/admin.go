package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	"github.com/limbo-dev/limbo/review"
)

// ListUsers returns the console users by sees, by email: an admin sees the
// users whose whole scope lies inside its own (review.Principal.SeesUser).
// The users table is small, so the rule is applied to the rows read rather
// than rewritten as SQL over the tenants text.
func (s *Store) ListUsers(ctx context.Context, by review.Principal) ([]User, error) {
	var all []User
	if err := s.db.SelectContext(ctx, &all, selectUsers); err != nil {
		return nil, fmt.Errorf("store.ListUsers: %w", err)
	}
	us := all[:0]
	for _, u := range all {
		if by.SeesUser(u.Scope()) {
			us = append(us, u)
		}
	}
	return us, nil
}

// UserSeenBy is the user id when by sees them, as ListUsers lists them
// (review.Principal.SeesUser); anyone else, like an unknown id, is
// review.ErrNotFound. For a page that asks before it acts on one user:
// whether the act itself is allowed is decided where it is made
// (UpdateUser, ResetPassword).
func (s *Store) UserSeenBy(ctx context.Context, by review.Principal, id string) (*User, error) {
	u, err := s.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if !by.SeesUser(u.Scope()) {
		return nil, review.ErrNotFound
	}
	return u, nil
}

const (
	/* Store.ListUsers */
	selectUsers = `SELECT ` + userColumns + ` FROM users ORDER BY email`
	/* Store.UpdateUser: the enabled all-tenants admins, locked in id order on
	   PostgreSQL before the target, so two admins demoting each other
	   serialise here and the second sees the first's change. */
	selectRootAdmins = `SELECT id FROM users WHERE role = 'admin' AND tenants = '*' AND disabled_at IS NULL ORDER BY id`
	/* Store.UpdateUser */
	updateUser = `UPDATE users SET role = ?, tenants = ?, disabled_at = ?, updated_at = ? WHERE id = ?`
)

// UserChange is an admin's change to a user.
type UserChange struct {
	Role     review.Role
	Scope    review.Scope
	Disabled bool
	// Seen is the user as the admin's form showed them (nil: not said).
	// When it no longer matches what is stored, another admin changed the
	// user since, and the change is refused (review.ErrConflict) rather
	// than undoing theirs: a page opened before a user was disabled would
	// otherwise enable them again with its unticked box.
	Seen *UserSeen
}

// ErrUserChangedMeanwhile refuses a change made from a page that showed
// the user before another admin changed them (UserChange.Seen).
var ErrUserChangedMeanwhile = fmt.Errorf("%w: changed since this page was opened (by another admin, or by this form sent twice); the page now shows the user as they are: change them again if you still mean to", review.ErrConflict)

// UserSeen is a user's grant as a page showed it: the role, the tenants
// as stored (User.TenantsText) and whether the account was disabled.
type UserSeen struct {
	Role     review.Role
	Tenants  string
	Disabled bool
}

// UpdateUser changes a user's role, tenants or enablement on behalf of by,
// within what by may grant (review.Principal.CheckUserChange); a user by
// does not see is review.ErrNotFound. The last enabled all-tenants admin
// cannot be demoted or disabled (review.KeepsAnAdmin). Any change ends the
// user's sessions at once, so nobody keeps powers they just lost; a
// "change" to what is stored already changes nothing and is not audited.
func (s *Store) UpdateUser(ctx context.Context, by review.Principal, id string, ch UserChange) (*User, error) {
	if !ch.Role.Valid() {
		return nil, fmt.Errorf("%w: field \"role\": must be reviewer, support, manager or admin", review.ErrInvalid)
	}
	if !ch.Scope.All && len(ch.Scope.Tenants) == 0 {
		return nil, fmt.Errorf("%w: field \"tenants\": give tenants, or * for all", review.ErrInvalid)
	}
	to := review.Grant{Role: ch.Role, Scope: ch.Scope, Disabled: ch.Disabled}
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		var roots []string
		if err := tx.SelectContext(ctx, &roots, s.lockRows(selectRootAdmins)); err != nil {
			return err
		}
		var u User
		if err := tx.GetContext(ctx, &u, s.rebind(s.lockRows(selectUserByID)), id); errors.Is(err, sql.ErrNoRows) {
			return review.ErrNotFound
		} else if err != nil {
			return err
		}
		by, err := s.actingNow(ctx, tx, by)
		if err != nil {
			return err
		}
		before := u.Grant()
		if err := by.CheckUserChange(u.ID, &before, to); err != nil {
			return err
		}
		if seen := ch.Seen; seen != nil && (seen.Role != u.Role || seen.Tenants != u.TenantsText || seen.Disabled != (u.DisabledAt != nil)) {
			return ErrUserChangedMeanwhile
		}
		others := len(roots)
		if slices.Contains(roots, u.ID) {
			others--
		}
		if err := review.KeepsAnAdmin(before, to, others); err != nil {
			return err
		}
		if string(ch.Role) == string(u.Role) && ch.Scope.String() == u.TenantsText && ch.Disabled == (u.DisabledAt != nil) {
			// Saved as it is (a row's Save pressed without a change):
			// nothing changes, so the user stays signed in and the trail
			// records no change.
			return nil
		}
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
		if ch.Disabled {
			// Disabled (often for a reason): enabled again, the user's
			// browsers start over, as after a password reset.
			if _, err := tx.ExecContext(ctx, s.rebind(forgetDevices), normEmail(u.Email)); err != nil {
				return err
			}
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Action: "user.changed",
			Detail: detailJSON(map[string]any{"user_id": id, "email": u.Email, "role": ch.Role, "tenants": ch.Scope.String(),
				"disabled": ch.Disabled, "was": map[string]any{"role": u.Role, "tenants": u.TenantsText, "disabled": u.DisabledAt != nil}})},
			before.Scope, ch.Scope)
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) || errors.Is(err, review.ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("store.UpdateUser: %w", err)
	}
	return s.UserByID(ctx, id)
}

const (
	/* Store.ResetPassword */
	updatePassword = `UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?`
	/* Store.ResetPassword, Store.UpdateUser (disabling): the account's device tokens (sessions.go). */
	forgetDevices = `DELETE FROM login_devices WHERE account = ?`
)

// CheckPassword refuses a password the console does not take: fewer than
// MinPasswordLen characters, or more than bcrypt reads (72 bytes).
func CheckPassword(password string) error {
	// Characters, as the rule says, not bytes: "ééééé€" is 13 bytes but
	// six characters.
	if utf8.RuneCountInString(password) < MinPasswordLen {
		return fmt.Errorf("%w: field \"password\": at least %d characters", review.ErrInvalid, MinPasswordLen)
	}
	if len(password) > 72 {
		return fmt.Errorf("%w: field \"password\": at most 72 bytes", review.ErrInvalid)
	}
	return nil
}

// ResetPassword gives the user id a new password on behalf of by, an admin
// who administers that user (review.Principal.CheckUserChange: a tenant's
// admin resets its own tenants' users, an all-tenants admin anyone's, and
// nobody their own here). The user's sessions end, its browsers' device
// tokens are forgotten, and the reset is audited without the password. It is the way back in for a user who
// lost their password, and out for one whose password leaked.
func (s *Store) ResetPassword(ctx context.Context, by review.Principal, id, password string) (*User, error) {
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), BcryptCost)
	if err != nil {
		return nil, fmt.Errorf("%w: field \"password\": %v", review.ErrInvalid, err)
	}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		var u User
		if err := tx.GetContext(ctx, &u, s.rebind(s.lockRows(selectUserByID)), id); errors.Is(err, sql.ErrNoRows) {
			return review.ErrNotFound
		} else if err != nil {
			return err
		}
		by, err := s.actingNow(ctx, tx, by)
		if err != nil {
			return err
		}
		grant := u.Grant()
		if by.UserID != "" && by.UserID == u.ID {
			if !by.SeesUser(grant.Scope) {
				return review.ErrNotFound
			}
			return fmt.Errorf("%w: your own password is reset by another admin, or at the command line (limbo user password)", review.ErrForbidden)
		}
		if err := by.CheckUserChange(u.ID, &grant, grant); err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, s.rebind(updatePassword), string(hash), now, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(endUserSessions), now, id); err != nil {
			return err
		}
		// A browser that signed in with the old password (whoever's, if
		// it leaked) no longer counts as the owner's: its device token
		// would spare it the address's and the account's limits.
		if _, err := tx.ExecContext(ctx, s.rebind(forgetDevices), normEmail(u.Email)); err != nil {
			return err
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Action: "user.password_reset",
			Detail: detailJSON(map[string]any{"user_id": u.ID, "email": u.Email})}, grant.Scope)
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) {
			return nil, err
		}
		return nil, fmt.Errorf("store.ResetPassword: %w", err)
	}
	return s.UserByID(ctx, id)
}

// actingNow re-reads a console user's grant inside the transaction that
// acts on it: the session was resolved when the request began, and an admin
// demoted or disabled since then must not finish an act its old grant
// allowed. The operator (no user id) is taken as given.
func (s *Store) actingNow(ctx context.Context, tx *sqlx.Tx, by review.Principal) (review.Principal, error) {
	if by.UserID == "" {
		return by, nil
	}
	// FOR SHARE on PostgreSQL: an admin's change to the user (UpdateUser
	// locks the row for update) commits before this read or after this
	// act, never in between; SQLite's one writer orders them already.
	var u User
	if err := tx.GetContext(ctx, &u, s.rebind(s.lockShared(selectUserByID)), by.UserID); errors.Is(err, sql.ErrNoRows) {
		return review.Principal{}, fmt.Errorf("%w: your account no longer exists", review.ErrForbidden)
	} else if err != nil {
		return review.Principal{}, err
	}
	if u.DisabledAt != nil {
		return review.Principal{}, fmt.Errorf("%w: your account is disabled", review.ErrForbidden)
	}
	return u.Principal(), nil
}

// administering is by, acting now, when it may manage tenant's tokens and
// webhook endpoints (review.Principal.CheckAdministers).
func (s *Store) administering(ctx context.Context, tx *sqlx.Tx, by review.Principal, tenant string) (review.Principal, error) {
	by, err := s.actingNow(ctx, tx, by)
	if err != nil {
		return by, err
	}
	return by, by.CheckAdministers(tenant)
}

// lockShared adds FOR SHARE on PostgreSQL (see lockRows).
func (s *Store) lockShared(q string) string {
	if s.engine == Postgres {
		return q + " FOR SHARE"
	}
	return q
}

// lockRows adds FOR UPDATE on PostgreSQL; SQLite's write transactions
// already hold the one write lock from BEGIN (_txlock=immediate).
func (s *Store) lockRows(q string) string {
	if s.engine == Postgres {
		return q + " FOR UPDATE"
	}
	return q
}

// Token is an API token as admins see it (never the secret).
type Token struct {
	ID        string     `db:"id"`
	Tenant    string     `db:"tenant"`
	Name      string     `db:"name"`
	CreatedAt time.Time  `db:"created_at"`
	RevokedAt *time.Time `db:"revoked_at"`
}

const (
	/* Store.ListTokens */
	selectTokens = `SELECT id, tenant, name, created_at, revoked_at FROM api_tokens`
	/* Store.RevokeToken */
	selectToken = selectTokens + ` WHERE id = ?`
	/* Store.RevokeToken */
	revokeToken = `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`
)

// ListTokens returns the API tokens of the tenants by sees; only admins
// list tokens.
func (s *Store) ListTokens(ctx context.Context, by review.Principal) ([]Token, error) {
	if !by.Role.Can(review.PermAdmin) {
		return nil, fmt.Errorf("%w: only admins manage API tokens", review.ErrForbidden)
	}
	// The tenants CheckAdministers allows.
	cond, args := inScope("tenant", by.Scope.List())
	q := selectTokens + ` WHERE ` + cond + ` ORDER BY tenant, created_at`
	var ts []Token
	if err := s.db.SelectContext(ctx, &ts, s.rebind(q), args...); err != nil {
		return nil, fmt.Errorf("store.ListTokens: %w", err)
	}
	return ts, nil
}

// RevokeToken ends an API token at once, on behalf of by; a token of a
// tenant by does not see is review.ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, by review.Principal, id string) error {
	defer s.tokens.forget(id) // after the commit, so no lookup can re-cache it as valid
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		by, err := s.actingNow(ctx, tx, by)
		if err != nil {
			return err
		}
		var t Token
		if err := tx.GetContext(ctx, &t, s.rebind(selectToken), id); errors.Is(err, sql.ErrNoRows) {
			return review.ErrNotFound
		} else if err != nil {
			return err
		}
		if err := by.CheckAdministers(t.Tenant); err != nil {
			if by.Role.Can(review.PermAdmin) {
				return review.ErrNotFound // another tenant's token: not there, as elsewhere
			}
			return err
		}
		if t.RevokedAt != nil {
			return nil
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, s.rebind(revokeToken), now, id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: t.Tenant, Action: "token.revoked",
			Detail: detailJSON(map[string]any{"token_id": id, "name": t.Name})})
	})
}
