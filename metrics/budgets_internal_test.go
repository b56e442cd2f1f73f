package metrics

import (
	"maps"
	"testing"

	"github.com/limbo-dev/limbo/store"
)

// TestBudgetsByDestination: per destination, the fewest retries any
// tenant has left and how many have none; no tenant is named.
func TestBudgetsByDestination(t *testing.T) {
	fill := func(dest, tenant string, retries, allowed int64) store.RetryBudgetFill {
		return store.RetryBudgetFill{Destination: dest, Tenant: tenant, Retries: retries, Allowed: allowed}
	}
	got := budgetsByDestination([]store.RetryBudgetFill{
		fill("files", "acme", 2, 10), fill("files", "globex", 10, 10), fill("files", "initech", 12, 10),
		fill("mail", "acme", 0, 10),
	})
	want := map[string]destinationBudgets{"files": {least: 0, spent: 2}, "mail": {least: 10, spent: 0}}
	if !maps.Equal(got, want) {
		t.Errorf("budgetsByDestination = %+v, want %+v", got, want)
	}
}
