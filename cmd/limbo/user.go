package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// cmdUserAdd adds a console user. The password is read from stdin (first
// line) when stdin is not a terminal and not empty; otherwise one is
// generated and printed once.
func cmdUserAdd(ctx context.Context, args []string, std stdio) error {
	stdin, stdout := std.in, std.out
	var s settings
	fs := newFlags("user add", std, &s)
	email := fs.String("email", "", "the user's email, used to sign in")
	role := fs.String("role", "", "reviewer, support, manager or admin")
	tenants := fs.String("tenants", "*", "tenants the user may see: a,b or * for all")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if *email == "" || *role == "" {
		return errors.New("user add: --email and --role are required")
	}
	scope, err := review.ParseScope(*tenants)
	if err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	password, generated, err := readPassword(stdin)
	if err != nil {
		return err
	}
	nu := store.NewUser{Email: *email, Password: password, Role: review.Role(*role), Scope: scope}
	if err := nu.Validate(); err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	st, err := openStore(ctx, s, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	u, err := st.AddUser(ctx, review.Operator("cli:"+osUser()), nu)
	if err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(stdout, "user %s (%s, tenants %s) added; password (shown once): %s\n", u.Email, u.Role, u.TenantsText, password)
	} else {
		fmt.Fprintf(stdout, "user %s (%s, tenants %s) added\n", u.Email, u.Role, u.TenantsText)
	}
	// As the console says it: a tenant named ahead of time, or mistyped,
	// shows the user nothing. The user is added either way.
	unknown, err := st.UnknownTenants(ctx, scope.List())
	switch {
	case err != nil:
		fmt.Fprintf(std.err, "warning: the tenants were not checked: %v\n", err)
	case len(unknown) > 0:
		fmt.Fprintf(std.err, "warning: no tenant is named %s yet: %s sees nothing there until it has an API token (limbo token create --tenant NAME) or operations; check the spelling\n",
			strings.Join(unknown, ", "), u.Email)
	}
	return nil
}

func readPassword(stdin io.Reader) (string, bool, error) {
	if f, ok := stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return store.GeneratePassword(), true, nil // a terminal: nothing piped in
		}
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, err
	}
	if p := strings.TrimRight(line, "\r\n"); p != "" {
		return p, false, nil
	}
	return store.GeneratePassword(), true, nil
}

// cmdUserPassword gives a console user a new password: the way back in for
// a user who lost theirs, or out for one whose password leaked. Read from
// stdin as user add reads it, or generated and printed once; the user's
// sessions end, and the reset is audited.
func cmdUserPassword(ctx context.Context, args []string, std stdio) error {
	var s settings
	fs := newFlags("user password", std, &s)
	email := fs.String("email", "", "the user's email")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if *email == "" {
		return errors.New("user password: --email is required")
	}
	password, generated, err := readPassword(std.in)
	if err != nil {
		return err
	}
	if err := store.CheckPassword(password); err != nil {
		return fmt.Errorf("user password: %w", err)
	}
	st, err := openStore(ctx, s, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	u, err := st.UserByEmail(ctx, *email)
	if errors.Is(err, review.ErrNotFound) {
		return fmt.Errorf("user password: no user has the email %s", *email)
	}
	if err != nil {
		return err
	}
	if _, err := st.ResetPassword(ctx, review.Operator("cli:"+osUser()), u.ID, password); err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(std.out, "user %s: new password (shown once): %s; their sessions have ended\n", u.Email, password)
	} else {
		fmt.Fprintf(std.out, "user %s: password changed; their sessions have ended\n", u.Email)
	}
	return nil
}
