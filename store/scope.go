package store

import "github.com/jmoiron/sqlx"

// inScope is the one SQL condition that bounds a read to a tenant scope
// (review.Scope.List: nil means all tenants, an empty list none): col IN
// (the tenants). Every scoped read (queue, audit, dashboard, tokens,
// webhook endpoints) writes its tenant filter with it.
func inScope(col string, scope []string) (string, []any) {
	switch {
	case scope == nil:
		return "1 = 1", nil
	case len(scope) == 0:
		return "1 = 0", nil
	}
	q, args, _ := sqlx.In(col+" IN (?)", scope) // cannot fail: scope is a non-empty slice
	return q, args
}
