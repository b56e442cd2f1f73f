package review

import (
	"fmt"
	"slices"
	"strings"
)

// Role is what a console user may do (SPEC "Roles").
type Role string

const (
	// RoleReviewer: everything support may, plus approve_retry and decisions
	// on financial, irreversible and regulated cases.
	RoleReviewer Role = "reviewer"
	// RoleSupport: claim cases; confirm, compensate, fail on unflagged cases.
	RoleSupport Role = "support"
	// RoleManager: read queue, cases, dashboard, audit; export.
	RoleManager Role = "manager"
	// RoleAdmin: users, tokens, policies, webhook endpoints; read everything.
	RoleAdmin Role = "admin"
)

// AllRoles lists the roles.
func AllRoles() []Role { return []Role{RoleReviewer, RoleSupport, RoleManager, RoleAdmin} }

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(AllRoles(), r) }

// Permission is one thing a role may do. Deny by default: a permission not
// granted below is refused.
type Permission string

const (
	PermRead          Permission = "read"           // queue, cases, operations, dashboard
	PermReadAudit     Permission = "read_audit"     // audit history and its export
	PermClaim         Permission = "claim"          // claim and release cases
	PermDecide        Permission = "decide"         // confirm, compensate, fail on unflagged cases
	PermDecideFlagged Permission = "decide_flagged" // decisions on financial/irreversible/regulated cases
	PermApproveRetry  Permission = "approve_retry"
	PermAdmin         Permission = "admin" // users, tokens, webhook endpoints
)

var grants = map[Role][]Permission{
	RoleReviewer: {PermRead, PermReadAudit, PermClaim, PermDecide, PermDecideFlagged, PermApproveRetry},
	RoleSupport:  {PermRead, PermClaim, PermDecide},
	RoleManager:  {PermRead, PermReadAudit},
	RoleAdmin:    {PermRead, PermReadAudit, PermAdmin},
}

// Can reports whether r holds p.
func (r Role) Can(p Permission) bool { return slices.Contains(grants[r], p) }

// CanDecide reports whether r may take action on op: approve_retry needs
// PermApproveRetry; a flagged (financial, irreversible, regulated) or
// irreversible-risk operation needs PermDecideFlagged; anything else PermDecide.
func (r Role) CanDecide(op *Operation, action string) bool {
	if action == DecideApproveRetry && !r.Can(PermApproveRetry) {
		return false
	}
	if len(op.Flags) > 0 || op.Risk == RiskIrreversible {
		return r.Can(PermDecideFlagged)
	}
	return r.Can(PermDecide)
}

// Scope is the set of tenants a user may see: all, or a list.
type Scope struct {
	All     bool
	Tenants []string
}

// ParseScope reads "*" or a comma-separated list of tenants.
func ParseScope(s string) (Scope, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return Scope{All: true}, nil
	}
	var sc Scope
	for _, t := range strings.Split(s, ",") {
		// NFC, as tenant names are stored (NormalizeTenant).
		if t = NFC(strings.TrimSpace(t)); t != "" && !slices.Contains(sc.Tenants, t) {
			sc.Tenants = append(sc.Tenants, t)
		}
	}
	if len(sc.Tenants) == 0 {
		return Scope{}, fmt.Errorf("%w: tenants: give a comma-separated list, or * for all", ErrInvalid)
	}
	slices.Sort(sc.Tenants)
	return sc, nil
}

// String writes the scope as ParseScope reads it.
func (s Scope) String() string {
	if s.All {
		return "*"
	}
	return strings.Join(s.Tenants, ",")
}

// Allows reports whether tenant is in scope.
func (s Scope) Allows(tenant string) bool { return s.All || slices.Contains(s.Tenants, tenant) }

// List is the tenant list for store filters: nil means all tenants.
func (s Scope) List() []string {
	if s.All {
		return nil
	}
	return s.Tenants
}
