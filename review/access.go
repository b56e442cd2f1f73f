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

// CanDecide reports whether r may take action on op: approve_retry, and
// approve and refuse on an approval case, need PermApproveRetry (a
// reviewer's: it lets an action run); a flagged (financial, irreversible, regulated) or
// irreversible-risk operation needs PermDecideFlagged; anything else PermDecide.
func (r Role) CanDecide(op *Operation, action string) bool {
	if (action == DecideApproveRetry || action == DecideApprove || action == DecideRefuse) && !r.Can(PermApproveRetry) {
		return false
	}
	if len(op.Flags) > 0 || op.Risk == RiskIrreversible {
		return r.Can(PermDecideFlagged)
	}
	return r.Can(PermDecide)
}

// DecidesCases says which cases r may decide, as the queue filters them:
// none (any false), or every case without one of the excluded reasons —
// a flag or an irreversible risk shows among a case's reasons
// (Assess), and an approval request needs PermApproveRetry.
func (r Role) DecidesCases() (any bool, excluded []Reason) {
	switch {
	case !r.Can(PermDecide):
		return false, nil
	case !r.Can(PermDecideFlagged):
		excluded = []Reason{ReasonFinancial, ReasonIrreversible, ReasonRegulated}
	}
	if !r.Can(PermApproveRetry) {
		excluded = append(excluded, ReasonApprovalRequired)
	}
	return true, excluded
}

// MayClaim reports whether r may claim a case with these reasons: a claim
// says "I am deciding this" and keeps everyone else from deciding, so only
// a role that may decide the case claims it (DecidesCases, the queue's
// rule). A support user's claim on an approval or flagged case held it,
// for the claim's whole term, from the reviewers who could decide it.
func (r Role) MayClaim(reasons []Reason) bool {
	decides, excluded := r.DecidesCases()
	if !decides {
		return false
	}
	for _, x := range excluded {
		if slices.Contains(reasons, x) {
			return false
		}
	}
	return true
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
		if strings.TrimSpace(t) == "" {
			continue
		}
		// Each a tenant name as tenants are named (NormalizeTenant): a
		// name no tenant can have would grant nothing, and a "*" in a
		// list would read as a tenant, not as all.
		name, err := NormalizeTenant(t)
		if err != nil {
			_, why, _ := strings.Cut(err.Error(), `field "tenant": `)
			if strings.Contains(t, "*") {
				why = "* stands alone, for all tenants"
			}
			return Scope{}, fmt.Errorf("%w: field \"tenants\": %q is not a tenant name: %s", ErrInvalid, t, why)
		}
		if !slices.Contains(sc.Tenants, name) {
			sc.Tenants = append(sc.Tenants, name)
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

// List is the tenant list for store filters: nil means all tenants, an
// empty list none. A scope of no tenant (Scope{}, what an unreadable grant
// is read as) lists none, never nil: it must not read as all.
func (s Scope) List() []string {
	switch {
	case s.All:
		return nil
	case s.Tenants == nil:
		return []string{}
	}
	return s.Tenants
}

// Covers reports whether every tenant of o lies inside s: all tenants
// cover everything; a list covers only lists that are subsets of it.
func (s Scope) Covers(o Scope) bool {
	if s.All {
		return true
	}
	if o.All {
		return false
	}
	for _, t := range o.Tenants {
		if !slices.Contains(s.Tenants, t) {
			return false
		}
	}
	return true
}

// Principal is who acts on what a tenant scope bounds: a signed-in console
// user, or the operator at the command line. Store methods that read or
// change users and tokens take one, so the scope rule is checked where the
// data is read and written, not in each handler.
type Principal struct {
	// Name is how the audit trail names the actor.
	Name string
	// UserID is the console user's id; empty for the operator.
	UserID string
	Role   Role
	Scope  Scope
}

// Operator is the person at the command line (`limbo user add`, `limbo
// token create`): they hold the database already, so every power.
func Operator(name string) Principal {
	return Principal{Name: name, Role: RoleAdmin, Scope: Scope{All: true}}
}

// Grant is the power a user holds: role, tenant scope, and whether the
// account is disabled.
type Grant struct {
	Role     Role
	Scope    Scope
	Disabled bool
}

// SeesUser reports whether p may see a user whose scope is target: an
// admin sees the users whose whole scope lies inside its own. Anyone else,
// and users reaching beyond p's scope, are invisible (404, not 403), as
// other tenants' records are.
//
// A user whose scope names no tenant at all (a stored scope that no longer
// reads, which allows nothing) is seen by an all-tenants admin only: the
// tenants it was meant for are unknown, and an empty scope lies inside
// every admin's, so any tenant's admin could otherwise take the user over.
func (p Principal) SeesUser(target Scope) bool {
	if !target.All && len(target.Tenants) == 0 {
		return p.Role == RoleAdmin && p.Scope.All
	}
	return p.Role == RoleAdmin && p.Scope.Covers(target)
}

// SeesTenant reports whether p may act on tenant's records.
func (p Principal) SeesTenant(tenant string) bool { return p.Scope.Allows(tenant) }

// CheckUserChange decides whether p may give a user the grant to: a new
// user when before is nil, else the user targetID holding before. The one
// rule for administering users (SPEC "Roles"):
//   - only admins administer users, and only users they see (SeesUser);
//   - nobody changes their own grant: an admin cannot widen itself, and
//     giving up its own powers is done by another admin;
//   - an admin grants only tenants it holds; all tenants, and the admin
//     role, are granted or changed only by an all-tenants admin.
//
// That at least one enabled all-tenants admin remains is decided by
// KeepsAnAdmin, which needs a count only the store can take.
func (p Principal) CheckUserChange(targetID string, before *Grant, to Grant) error {
	if p.Role != RoleAdmin {
		return fmt.Errorf("%w: only admins administer users", ErrForbidden)
	}
	if before != nil && !p.SeesUser(before.Scope) {
		return ErrNotFound
	}
	if before != nil && targetID == p.UserID {
		return fmt.Errorf("%w: you cannot change your own role, tenants or status; ask another admin", ErrForbidden)
	}
	if p.Scope.All {
		return nil
	}
	switch {
	case before != nil && before.Role == RoleAdmin:
		return fmt.Errorf("%w: only an all-tenants admin changes admins", ErrForbidden)
	case to.Role == RoleAdmin:
		return fmt.Errorf("%w: only an all-tenants admin grants the admin role", ErrForbidden)
	case to.Scope.All:
		return fmt.Errorf("%w: only an all-tenants admin grants all tenants (*)", ErrForbidden)
	case !p.Scope.Covers(to.Scope):
		return fmt.Errorf("%w: you can grant only tenants you hold (%s)", ErrForbidden, p.Scope)
	}
	return nil
}

// IsRootAdmin reports whether g is an enabled all-tenants admin: the grant
// of which at least one must always remain.
func (g Grant) IsRootAdmin() bool { return g.Role == RoleAdmin && g.Scope.All && !g.Disabled }

// KeepsAnAdmin refuses a change that would take away the last enabled
// all-tenants admin: without one, nobody could administer all tenants or
// create another such admin from the console. others counts the enabled
// all-tenants admins besides the user changed.
func KeepsAnAdmin(before, to Grant, others int) error {
	if before.IsRootAdmin() && !to.IsRootAdmin() && others == 0 {
		return fmt.Errorf("%w: this is the last enabled all-tenants admin; make another one first", ErrForbidden)
	}
	return nil
}

// CheckAdministers decides whether p may manage tenant's API tokens and
// webhook endpoints: admins only, and only for tenants in their scope.
func (p Principal) CheckAdministers(tenant string) error {
	if !p.Role.Can(PermAdmin) {
		return fmt.Errorf("%w: only admins manage API tokens and webhook endpoints", ErrForbidden)
	}
	if !p.Scope.Allows(tenant) {
		return fmt.Errorf("%w: tenant %q is outside your scope (%s)", ErrForbidden, tenant, p.Scope)
	}
	return nil
}
