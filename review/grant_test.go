package review

import (
	"testing"
	"time"
)

func TestGrantable(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	forgets := Destination{HonoursKeys: true, KeyRetention: time.Hour}
	op := func(change func(*Operation)) *Operation {
		o := &Operation{State: Pending, Risk: RiskIdempotentWrite, MaxAttempts: 3, Deadline: now.Add(time.Hour)}
		if change != nil {
			change(o)
		}
		return o
	}
	for _, tt := range []struct {
		name string
		op   *Operation
		d    Destination
		want Grantability
	}{
		{"a first attempt", op(nil), forgets, GrantNow},
		{"a retry after its backoff", op(func(o *Operation) { o.State, o.AttemptCount, o.NextAttemptAt = RetryWait, 1, &earlier }), Destination{}, GrantNow},
		{"a retry at the end of its backoff", op(func(o *Operation) { o.State, o.AttemptCount, o.NextAttemptAt = RetryWait, 1, &now }), Destination{}, GrantNow},
		{"in flight", op(func(o *Operation) { o.State = InFlight }), Destination{}, GrantNotAttemptable},
		{"awaiting approval", op(func(o *Operation) { o.State = AwaitingApproval }), Destination{}, GrantNotAttemptable},
		{"confirmed", op(func(o *Operation) { o.State = Confirmed }), Destination{}, GrantNotAttemptable},
		{"ambiguous, with its budget spent too", op(func(o *Operation) { o.State, o.AttemptCount = Ambiguous, 3 }), Destination{}, GrantNotAttemptable},
		{"attempts spent", op(func(o *Operation) { o.State, o.AttemptCount = RetryWait, 3 }), Destination{}, GrantAttemptsSpent},
		{"attempts spent past the deadline", op(func(o *Operation) { o.State, o.AttemptCount, o.Deadline = RetryWait, 3, earlier }), Destination{}, GrantAttemptsSpent},
		{"the deadline now", op(func(o *Operation) { o.Deadline = now }), Destination{}, GrantDeadlinePassed},
		{"past the deadline, in backoff", op(func(o *Operation) {
			o.State, o.AttemptCount, o.Deadline, o.NextAttemptAt = RetryWait, 1, earlier, &later
		}), Destination{}, GrantDeadlinePassed},
		{"in backoff", op(func(o *Operation) { o.State, o.AttemptCount, o.NextAttemptAt = RetryWait, 1, &later }), forgets, GrantBackoff},
		{"a retry whose key may be forgotten", op(func(o *Operation) { o.State, o.AttemptCount = RetryWait, 1 }), forgets, GrantIfKeyKept},
		{"a retry to a destination that keeps keys", op(func(o *Operation) { o.State, o.AttemptCount = RetryWait, 1 }), Destination{HonoursKeys: true}, GrantNow},
		{"a retry of a compensable write", op(func(o *Operation) { o.State, o.AttemptCount, o.Risk = RetryWait, 1, RiskCompensableWrite }), forgets, GrantNow},
	} {
		if got := Grantable(tt.op, tt.d, now); got != tt.want {
			t.Errorf("%s: Grantable = %s, want %s", tt.name, got, tt.want)
		}
	}
}
