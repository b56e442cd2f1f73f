package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	"github.com/limbo-dev/limbo/review"
)

// BcryptCost is the password hashing cost: 10, the floor RELIABILITY.md sets
// (each step doubles the work; sign-in stays well under 100 ms on our machines).
const BcryptCost = 10

// User is a console user.
type User struct {
	ID           string      `db:"id"`
	Email        string      `db:"email"`
	PasswordHash string      `db:"password_hash"`
	Role         review.Role `db:"role"`
	TenantsText  string      `db:"tenants"`
	// Language is the console language the user chose ("en", "it"), or ""
	// to follow the browser.
	Language   string     `db:"language"`
	DisabledAt *time.Time `db:"disabled_at"`
	CreatedAt  time.Time  `db:"created_at"`
	UpdatedAt  time.Time  `db:"updated_at"`
}

// Scope is the tenants the user may see.
func (u *User) Scope() review.Scope {
	sc, err := review.ParseScope(u.TenantsText)
	if err != nil {
		return review.Scope{} // an unreadable scope allows nothing
	}
	return sc
}

// NewUser is a user to add.
type NewUser struct {
	Email    string
	Password string
	Role     review.Role
	Scope    review.Scope
}

// Grant is the power the user holds, as review's rules read it.
func (u *User) Grant() review.Grant {
	return review.Grant{Role: u.Role, Scope: u.Scope(), Disabled: u.DisabledAt != nil}
}

// Principal is the user acting: what the store checks their acts against.
func (u *User) Principal() review.Principal {
	return review.Principal{Name: u.Email, UserID: u.ID, Role: u.Role, Scope: u.Scope()}
}

// MinPasswordLen is the shortest password accepted.
const MinPasswordLen = 12

// GeneratePassword returns a random password (for `limbo user add` without stdin).
func GeneratePassword() string {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

const userColumns = `id, email, password_hash, role, tenants, language, disabled_at, created_at, updated_at`

const (
	/* Store.AddUser */
	insertUser = `INSERT INTO users (id, email, password_hash, role, tenants, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	/* Store.UserByEmail */
	selectUserByEmail = `SELECT ` + userColumns + ` FROM users WHERE email = ?`
	/* Store.storedAsOtherForm */
	selectUserEmails = `SELECT id, email FROM users`
	/* Store.UserByID */
	selectUserByID = `SELECT ` + userColumns + ` FROM users WHERE id = ?`
)

// Validate checks nu as AddUser does, for a caller that checks its input
// before it opens the database (limbo user add).
func (nu NewUser) Validate() error {
	_, err := nu.check()
	return err
}

// check is Validate, returning the email as stored (canonicalEmail).
func (nu NewUser) check() (string, error) {
	addr, err := mail.ParseAddress(nu.Email)
	if err != nil || addr.Address != strings.TrimSpace(nu.Email) {
		return "", fmt.Errorf("%w: field \"email\": not an email address", review.ErrInvalid)
	}
	if len(addr.Address) > MaxEmailLen {
		return "", fmt.Errorf("%w: field \"email\": at most %d bytes", review.ErrInvalid, MaxEmailLen)
	}
	if !nu.Role.Valid() {
		return "", fmt.Errorf("%w: field \"role\": must be reviewer, support, manager or admin", review.ErrInvalid)
	}
	if err := CheckPassword(nu.Password); err != nil {
		return "", err
	}
	if !nu.Scope.All && len(nu.Scope.Tenants) == 0 {
		return "", fmt.Errorf("%w: field \"tenants\": give tenants, or * for all", review.ErrInvalid)
	}
	return canonicalEmail(addr.Address), nil
}

// MaxEmailLen is the longest address a user may have: the most a mail
// path carries (RFC 5321: 256 octets with its angle brackets).
const MaxEmailLen = 254

// AddUser creates a console user on behalf of by, within what by may grant
// (review.Principal.CheckUserChange). The email is unique (case-insensitive).
func (s *Store) AddUser(ctx context.Context, by review.Principal, nu NewUser) (*User, error) {
	email, err := nu.check()
	if err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(nu.Password), BcryptCost)
	if err != nil {
		return nil, fmt.Errorf("%w: field \"password\": %v", review.ErrInvalid, err)
	}
	now := s.now()
	u := &User{ID: newID("usr_", now), Email: email, PasswordHash: string(hash), Role: nu.Role, TenantsText: nu.Scope.String(), CreatedAt: now, UpdatedAt: now}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		by, err := s.actingNow(ctx, tx, by)
		if err != nil {
			return err
		}
		if err := by.CheckUserChange("", nil, review.Grant{Role: nu.Role, Scope: nu.Scope}); err != nil {
			return err
		}
		if other, err := s.storedAsOtherForm(ctx, tx, email); err != nil {
			return err
		} else if other != "" {
			return fmt.Errorf("%w: a user with email %s exists", review.ErrConflict, email)
		}
		if _, err := tx.ExecContext(ctx, s.rebind(insertUser), u.ID, u.Email, u.PasswordHash, string(u.Role), u.TenantsText, now, now); err != nil {
			if isUnique(err) {
				return fmt.Errorf("%w: a user with email %s exists", review.ErrConflict, email)
			}
			return err
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Action: "user.added",
			Detail: detailJSON(map[string]any{"user_id": u.ID, "email": email, "role": u.Role, "tenants": u.TenantsText})}, nu.Scope)
	})
	if err != nil {
		if errors.Is(err, review.ErrConflict) || errors.Is(err, review.ErrForbidden) {
			return nil, err
		}
		return nil, fmt.Errorf("store.AddUser: %w", err)
	}
	return u, nil
}

// UserByEmail finds a user; unknown is review.ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	email = canonicalEmail(strings.TrimSpace(email))
	u, err := s.getUser(ctx, selectUserByEmail, email)
	if !errors.Is(err, review.ErrNotFound) {
		return u, err
	}
	id, err := s.storedAsOtherForm(ctx, s.db, email)
	if err != nil || id == "" {
		return nil, cmp.Or(err, review.ErrNotFound)
	}
	return s.getUser(ctx, selectUserByID, id)
}

// storedAsOtherForm finds the user whose email is email in another form
// than canonicalEmail's: one added before addresses were normalised (NFD,
// say) and never changed since. The users are few, and only a lookup that
// missed comes here; "" when there is none.
func (s *Store) storedAsOtherForm(ctx context.Context, q sqlx.QueryerContext, email string) (string, error) {
	var rows []struct {
		ID    string `db:"id"`
		Email string `db:"email"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, selectUserEmails); err != nil {
		return "", fmt.Errorf("store.UserByEmail: %w", err)
	}
	for _, r := range rows {
		if r.Email != email && canonicalEmail(r.Email) == email {
			return r.ID, nil
		}
	}
	return "", nil
}

// UserByID finds a user; unknown is review.ErrNotFound.
func (s *Store) UserByID(ctx context.Context, id string) (*User, error) {
	return s.getUser(ctx, selectUserByID, id)
}

func (s *Store) getUser(ctx context.Context, q string, arg string) (*User, error) {
	var u User
	err := s.db.GetContext(ctx, &u, s.rebind(q), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.getUser: %w", err)
	}
	return &u, nil
}

// hashSessionID is what the sessions table stores for a cookie's id.
func hashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func mailAddress(e string) (string, error) {
	a, err := mail.ParseAddress(strings.TrimSpace(e))
	if err != nil {
		return "", err
	}
	return canonicalEmail(a.Address), nil
}

// canonicalEmail is an address as users are stored and looked up: lower
// case, in NFC, so that "Élodie@…" typed composed, decomposed or in capitals
// is one user, not two accounts for one person.
func canonicalEmail(addr string) string {
	return review.NFC(strings.ToLower(addr))
}

/* Store.SetLanguage */
const updateUserLanguage = `UPDATE users SET language = ?, updated_at = ? WHERE id = ?`

// SetLanguage saves the console language a user chose for themselves ("" =
// follow the browser). The caller checks lang is one the console offers.
func (s *Store) SetLanguage(ctx context.Context, by review.Principal, lang string) error {
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		res, err := tx.ExecContext(ctx, s.rebind(updateUserLanguage), lang, now, by.UserID)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return review.ErrNotFound
		}
		return s.appendUserEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Action: "user.language",
			Detail: detailJSON(map[string]any{"user_id": by.UserID, "language": lang})}, by.Scope)
	})
}

/* Store.UnknownTenants: the tenants named that exist (an IN list follows). */
const selectTenantsNamed = `SELECT name FROM tenants WHERE `

// UnknownTenants is which of names no tenant has yet, in their order: a
// tenant exists once it has an API token, a webhook endpoint or
// operations. A user's scope may name one ahead of time, but then the user
// sees nothing there, which is also what a typo ("acmee") does; the
// console and limbo user add say so rather than accept it silently.
func (s *Store) UnknownTenants(ctx context.Context, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	cond, args := inScope("name", names)
	var known []string
	if err := s.db.SelectContext(ctx, &known, s.rebind(selectTenantsNamed+cond), args...); err != nil {
		return nil, fmt.Errorf("store.UnknownTenants: %w", err)
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	return unknown, nil
}
