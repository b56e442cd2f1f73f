package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
)

func TestQueueWhere(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		f     QueueFilter
		where string
		args  []any
	}{
		{"everything in every scope", QueueFilter{}, "1 = 1", nil},
		{"a tenant within a scope", QueueFilter{Scope: []string{"acme", "globex"}, Tenant: "acme"},
			"c.tenant IN (?, ?) AND c.tenant = ?", []any{"acme", "globex", "acme"}},
		{"a destination, a reason and a flag", QueueFilter{Destination: "stripe", Reason: string(review.AllReasons()[1]), Flag: "financial"},
			"1 = 1 AND c.destination = ? AND (c.reason_bits & ?) <> 0 AND (',' || c.flags || ',') LIKE ? ESCAPE '\\'",
			[]any{"stripe", int64(2), "%,financial,%"}},
		{"my claims, old enough", QueueFilter{ClaimedBy: "alice", MinAge: time.Hour},
			"1 = 1 AND c.claimed_by = ? AND c.claim_until > ? AND c.opened_at <= ?",
			[]any{"alice", now, now.Add(-time.Hour)}},
		{"unclaimed, searched", QueueFilter{Unclaimed: true, Search: "  op_1 "},
			"1 = 1 AND (c.claimed_by = '' OR c.claim_until IS NULL OR c.claim_until <= ?) AND " +
				"(c.tenant = ? OR c.operation_id = ? OR o.key = ? OR o.source_ref = ? OR o.resource_ref = ? OR c.id = ?)",
			[]any{now, "op_1", "op_1", "op_1", "op_1", "op_1", "op_1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			where, args, err := queueWhere(tt.f, now)
			if err != nil {
				t.Fatal(err)
			}
			if where != tt.where {
				t.Errorf("where\n got %s\nwant %s", where, tt.where)
			}
			if !reflect.DeepEqual(args, tt.args) {
				t.Errorf("args\n got %#v\nwant %#v", args, tt.args)
			}
		})
	}
	if _, _, err := queueWhere(QueueFilter{Reason: "no_such_reason"}, now); !errors.Is(err, review.ErrInvalid) {
		t.Errorf("an unknown reason: %v, want review.ErrInvalid", err)
	}
	for _, flag := range []string{"FINANCIAL", `\`, "%", "_", "vip"} {
		if _, _, err := queueWhere(QueueFilter{Flag: flag}, now); !errors.Is(err, review.ErrInvalid) {
			t.Errorf("flag %q: %v, want review.ErrInvalid", flag, err)
		}
	}
}
