package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

const ownerPassword = "correct horse battery"

// throttleStore is a store on a fake clock with one user, owner@example.com.
func throttleStore(t *testing.T, e store.Engine) (*store.Store, *storetest.Clock) {
	t.Helper()
	clk := storetest.NewClock(t0)
	s := storetest.Open(t, e, store.Options{Clock: clk.Now})
	if _, err := s.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "owner@example.com", Password: ownerPassword,
		Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
		t.Fatal(err)
	}
	return s, clk
}

// tryLogin signs in and sorts the answer: "ok", "bad" (wrong credentials)
// or "throttled" with the wait.
func tryLogin(t *testing.T, s *store.Store, email, password, addr string) (string, time.Duration) {
	t.Helper()
	_, _, err := s.Login(context.Background(), email, password, addr, store.SessionPolicy{})
	var th *store.ThrottledError
	switch {
	case err == nil:
		return "ok", 0
	case errors.Is(err, store.ErrBadCredentials):
		return "bad", 0
	case errors.As(err, &th):
		if th.RetryAfter <= 0 {
			t.Fatalf("throttled with RetryAfter %v", th.RetryAfter)
		}
		return "throttled", th.RetryAfter
	}
	t.Fatalf("Login(%s, %s): %v", email, addr, err)
	return "", 0
}

func wantLogin(t *testing.T, s *store.Store, email, password, addr, want string, wantWait time.Duration) {
	t.Helper()
	got, wait := tryLogin(t, s, email, password, addr)
	if got != want || wait != wantWait {
		t.Fatalf("Login(%s from %s) = %s (wait %v), want %s (wait %v)", email, addr, got, wait, want, wantWait)
	}
}

// loginEvents counts the audit trail's login events by action, and checks
// each names its address.
func loginEvents(t *testing.T, s *store.Store) map[string]int {
	t.Helper()
	evs, err := s.AuditEvents(context.Background(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Action]++
		if ev.Action == "login.failed" || ev.Action == "login.throttled" {
			var d struct{ Addr string }
			if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil || d.Addr == "" {
				t.Errorf("%s event without its address: %s", ev.Action, ev.Detail)
			}
		}
	}
	return n
}

// TestLoginThrottleSparesTheOwner: an attacker failing on an account from
// many addresses gets a bounded number of guesses, and does not lock the
// owner out of the browser they sign in with (its device token). Before, each address that
// failed on the account waited longer and longer as the account's
// failures from anywhere grew (up to 15 minutes), the owner's own typo
// included, while every fresh address got a guess of its own, without
// bound.
func TestLoginThrottleSparesTheOwner(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, clk := throttleStore(t, e)
		const owner, usual = "owner@example.com", "192.0.2.50"
		attacker := func(i int) string { return fmt.Sprintf("10.9.0.%d", i) }
		// The owner has signed in with their browser before.
		_, _, browser := signInWith(t, s, owner, ownerPassword, usual, "")

		// Each attacking address gets five guesses, slowed after the third
		// by its own failures only (1 s, then 2 s), then is refused.
		guesses := 0
		attack := func(i int) {
			t.Helper()
			for _, wait := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
				if wait > 0 {
					wantLogin(t, s, owner, "guess guess guess", attacker(i), "throttled", wait)
					clk.Advance(wait)
				}
				wantLogin(t, s, owner, "guess guess guess", attacker(i), "bad", 0)
				guesses++
			}
			wantLogin(t, s, owner, "guess guess guess", attacker(i), "throttled", 15*time.Minute-3*time.Second)
		}
		for i := 1; i <= 8; i++ {
			attack(i)
		}
		// Forty failures on the account, below its ceiling: a clean address,
		// even one the owner never used, is not slowed by them.
		wantLogin(t, s, owner, ownerPassword, "192.0.2.77", "ok", 0)
		attack(9)
		attack(10)
		if guesses != 50 {
			t.Fatalf("%d guesses, want 50", guesses)
		}
		// The account's ceiling: no further address gets a guess, whatever
		// it sends, until failures age out of the window.
		for i := 11; i <= 30; i++ {
			if got, _ := tryLogin(t, s, owner, "guess guess guess", attacker(i)); got != "throttled" {
				t.Fatalf("a fresh address past the ceiling: %s, want throttled", got)
			}
		}
		for _, addr := range []string{"192.0.2.99", usual} {
			if got, _ := tryLogin(t, s, owner, ownerPassword, addr); got != "throttled" {
				t.Fatalf("the right password from %s without the browser's token, past the ceiling: %s, want throttled", addr, got)
			}
		}
		// The owner, with the browser they signed in with, gets in, from
		// their usual address or another; a typo there costs no more than a
		// typo (the attacker's failures do not count against it), and the
		// right password then gets in.
		want := func(addr, password, wantGot string) {
			t.Helper()
			if got, wait, _ := signInWith(t, s, owner, password, addr, browser); got != wantGot || wait != 0 {
				t.Fatalf("the owner's browser from %s: %s (wait %v), want %s", addr, got, wait, wantGot)
			}
		}
		want(usual, ownerPassword, "ok")
		want(usual, "typo typo typo", "bad")
		want(usual, ownerPassword, "ok")
		want("192.0.2.77", ownerPassword, "ok")

		// Once the failures age out, a fresh address may try again.
		clk.Advance(15 * time.Minute)
		wantLogin(t, s, owner, ownerPassword, "192.0.2.99", "ok", 0)

		n := loginEvents(t, s)
		if n["login.failed"] != guesses+1 || n["login.succeeded"] != 6 {
			t.Fatalf("audit: %v, want %d failed, 6 succeeded", n, guesses+1)
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestLoginThrottleSharedAddress: many people behind one office NAT (or one
// IPv6 /64) share an address. Someone there failing on twenty accounts
// refused the address to everyone: colleagues typing their own right
// password were turned away for up to 15 minutes. A colleague signing in
// with the browser they signed in with before (its device token) is not
// refused by the address's limit now; without it they are, as anyone is,
// and the refusal is the same whether or not the account ever signed in
// from there (an exemption by address told the attacker which accounts
// did).
func TestLoginThrottleSharedAddress(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		for _, office := range []struct{ name, colleague, attacker string }{
			{"IPv4 NAT", "198.51.100.7", "198.51.100.7"},
			{"IPv6 /64", "2001:db8:5:6::5", "2001:db8:5:6::66"},
		} {
			t.Run(office.name, func(t *testing.T) {
				s, clk := throttleStore(t, e)
				const colleague = "owner@example.com"
				_, _, browser := signInWith(t, s, colleague, ownerPassword, office.colleague, "")
				for i := range 20 {
					wantLogin(t, s, fmt.Sprintf("user%d@example.com", i), "wrong wrong wrong", office.attacker, "bad", 0)
				}
				// The address is refused to every sign-in without a token,
				// alike for an account that signed in from there and one that
				// did not...
				for _, who := range []string{"user99@example.com", colleague} {
					if got, wait := tryLogin(t, s, who, "wrong wrong wrong", office.attacker); got != "throttled" || wait != 15*time.Minute {
						t.Fatalf("%s from the address, no token: %s (wait %v), want throttled for 15m", who, got, wait)
					}
				}
				// ...not to the colleague's browser.
				if got, _, _ := signInWith(t, s, colleague, ownerPassword, office.colleague, browser); got != "ok" {
					t.Fatalf("the colleague's browser at the refused address: %s, want ok", got)
				}
				// Once the failures age out, the address may try again; the
				// colleague's account from there is then bounded by the
				// account × address limit (TestLoginDeviceOutlastsAGuesserAtTheSameAddress).
				clk.Advance(15 * time.Minute)
				wantLogin(t, s, colleague, "guess guess guess", office.attacker, "bad", 0)
			})
		}
	})
}

// TestLoginThrottlePairLock: five failures of one address on one account
// refuse that pair — even with the right password — until the oldest ages
// out of the 15-minute window; other addresses are not affected. A success
// then clears the pair's failures.
func TestLoginThrottlePairLock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, clk := throttleStore(t, e)
		const owner, addr = "owner@example.com", "10.0.0.2"
		for _, step := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
			clk.Advance(step) // the growing delay, waited out
			wantLogin(t, s, owner, "wrong wrong wrong", addr, "bad", 0)
		}
		// Five failures, the first at t0 and the last at t0+3s: the pair waits
		// until t0+15m, not merely the 4 s delay.
		wantLogin(t, s, owner, ownerPassword, addr, "throttled", 15*time.Minute-3*time.Second)
		wantLogin(t, s, owner, ownerPassword, "10.0.0.3", "ok", 0)
		clk.Advance(15*time.Minute - 4*time.Second)
		wantLogin(t, s, owner, ownerPassword, addr, "throttled", time.Second)
		clk.Advance(time.Second)
		// The three failures at t0 have aged out; two remain, below any limit.
		wantLogin(t, s, owner, ownerPassword, addr, "ok", 0)
		// The success cleared the pair: a typo now is an ordinary failure,
		// with no delay left over.
		wantLogin(t, s, owner, "wrong wrong wrong", addr, "bad", 0)
		wantLogin(t, s, owner, "wrong wrong wrong", addr, "bad", 0)
		// The two refusals were one period: audited once.
		if n := loginEvents(t, s); n["login.failed"] != 7 || n["login.throttled"] != 1 || n["login.succeeded"] != 2 {
			t.Fatalf("audit: %v", n)
		}
	})
}

// TestLoginThrottleAddressLock: twenty failures from one address, whatever
// the accounts, refuse that address for every account until the oldest
// ages out; another address is not affected.
func TestLoginThrottleAddressLock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, clk := throttleStore(t, e)
		const addr = "10.0.0.7"
		for i := 0; i < 20; i++ {
			if i > 0 {
				clk.Advance(time.Second)
			}
			wantLogin(t, s, fmt.Sprintf("user%d@example.com", i), "wrong wrong wrong", addr, "bad", 0)
		}
		// The oldest of the twenty was 19 s ago.
		wait := 15*time.Minute - 19*time.Second
		wantLogin(t, s, "user99@example.com", "wrong wrong wrong", addr, "throttled", wait)
		wantLogin(t, s, "owner@example.com", ownerPassword, addr, "throttled", wait)
		wantLogin(t, s, "owner@example.com", ownerPassword, "10.0.0.8", "ok", 0)
		clk.Advance(wait - time.Second)
		wantLogin(t, s, "owner@example.com", ownerPassword, addr, "throttled", time.Second)
		clk.Advance(time.Second)
		// Nineteen failures left in the window: one more try is allowed.
		wantLogin(t, s, "owner@example.com", ownerPassword, addr, "ok", 0)
		wantLogin(t, s, "user98@example.com", "wrong wrong wrong", addr, "bad", 0)
		// Twenty again (the refused attempts were never counted).
		wantLogin(t, s, "user97@example.com", "wrong wrong wrong", addr, "throttled", time.Second)
	})
}

// TestLoginThrottleFloodAuditsBounded: a flood of refused sign-ins writes
// a bounded number of audit events. Each refusal wrote one
// (login.throttled), so anyone could grow the append-only trail without
// end by sending sign-ins. Now a refusal period is audited when it starts,
// and again at its 10th, 100th, 1000th… refusal with the count so far;
// every refusal is still counted for the metric.
func TestLoginThrottleFloodAuditsBounded(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, clk := throttleStore(t, e)
		const owner, addr, other = "owner@example.com", "10.0.1.1", "10.0.1.2"
		for range 5 {
			wantLogin(t, s, owner, "wrong wrong wrong", addr, "bad", 0)
			clk.Advance(4 * time.Second) // past the growing delay
		}
		// The pair is refused now: a flood of 1000 tries on it, and as many
		// from another address on 1000 accounts once that address is
		// refused for all of them.
		const flood = 1000
		for range flood {
			if got, _ := tryLogin(t, s, owner, ownerPassword, addr); got != "throttled" {
				t.Fatalf("the refused pair: %s", got)
			}
		}
		for i := range 20 {
			wantLogin(t, s, fmt.Sprintf("user%d@example.com", i), "wrong wrong wrong", other, "bad", 0)
		}
		for i := range flood {
			if got, _ := tryLogin(t, s, fmt.Sprintf("flood%d@example.com", i), "wrong wrong wrong", other); got != "throttled" {
				t.Fatalf("the refused address: %s", got)
			}
		}
		evs, err := s.AuditEvents(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		type refusal struct {
			Email, Addr, Rule string
			Refusals          int64
		}
		var got []string
		for _, ev := range evs {
			if ev.Action == "login.throttled" || ev.Action == "login.still_throttled" {
				var d refusal
				if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %s %s %s %d", ev.Action, d.Rule, d.Addr, d.Email, d.Refusals))
			}
		}
		// The first refusal of each is audited, then each tenfold.
		want := []string{
			"login.throttled account_address 10.0.1.1 owner@example.com 0",
			"login.still_throttled account_address 10.0.1.1 owner@example.com 10",
			"login.still_throttled account_address 10.0.1.1 owner@example.com 100",
			"login.still_throttled account_address 10.0.1.1 owner@example.com 1000",
			"login.throttled address 10.0.1.2 flood0@example.com 0",
			"login.still_throttled address 10.0.1.2 flood9@example.com 10",
			"login.still_throttled address 10.0.1.2 flood99@example.com 100",
			"login.still_throttled address 10.0.1.2 flood999@example.com 1000",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("refusals audited:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := s.LoginRefusals(); n["account_address"] != flood || n["address"] != flood {
			t.Errorf("LoginRefusals = %v, want %d of each", n, flood)
		}
		// Once a period is over, the next refusal starts a new one, audited
		// as such: the pair's oldest failure ages out, one more failure is
		// let through, and the pair is refused again.
		clk.Advance(15*time.Minute - 16*time.Second)
		wantLogin(t, s, owner, "wrong wrong wrong", addr, "bad", 0)
		if got, _ := tryLogin(t, s, owner, ownerPassword, addr); got != "throttled" {
			t.Fatalf("the pair again: %s", got)
		}
		if n := loginEvents(t, s); n["login.throttled"] != 3 {
			t.Errorf("a new period after the first ended: %d login.throttled events, want 3", n["login.throttled"])
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestLoginThrottleIPv6Network: IPv6 addresses count by their /64, where
// one client can take a fresh address for every try (throttleAddr's table
// is in throttle_internal_test.go); the audit keeps the full address.
func TestLoginThrottleIPv6Network(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, _ := throttleStore(t, e)
		const owner = "owner@example.com"
		for _, a := range []string{"2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:1:2:ffff::c"} {
			wantLogin(t, s, owner, "wrong wrong wrong", a, "bad", 0)
		}
		wantLogin(t, s, owner, ownerPassword, "2001:db8:1:2::d", "throttled", time.Second)
		wantLogin(t, s, owner, ownerPassword, "2001:db8:1:3::1", "ok", 0)
		evs, err := s.AuditEvents(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, ev := range evs {
			if ev.Action == "login.failed" || ev.Action == "login.throttled" {
				var d struct{ Addr string }
				if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
					t.Fatal(err)
				}
				addrs = append(addrs, d.Addr)
			}
		}
		if want := "[2001:db8:1:2::a 2001:db8:1:2::b 2001:db8:1:2:ffff::c 2001:db8:1:2::d]"; fmt.Sprint(addrs) != want {
			t.Errorf("the audit records %v, want the full addresses %s", addrs, want)
		}
	})
}

// TestThrottledErrorWords: the refusal says when to try again, in words,
// and Seconds rounds up for Retry-After.
func TestThrottledErrorWords(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		wait    time.Duration
		seconds int
		words   string
	}{
		{time.Millisecond, 1, "Try again in 1 second."},
		{time.Second, 1, "Try again in 1 second."},
		{1500 * time.Millisecond, 2, "Try again in 2 seconds."},
		{60 * time.Second, 60, "Try again in 60 seconds."},
		{61 * time.Second, 61, "Try again in 2 minutes."},
		{15*time.Minute - 3*time.Second, 897, "Try again in 15 minutes."},
		{15 * time.Minute, 900, "Try again in 15 minutes."},
	} {
		e := &store.ThrottledError{RetryAfter: tt.wait}
		if e.Seconds() != tt.seconds || e.Error() != "Too many failed sign-ins. "+tt.words {
			t.Errorf("wait %v: %d s, %q; want %d s, %q", tt.wait, e.Seconds(), e.Error(), tt.seconds, tt.words)
		}
	}
}

// TestLoginThrottleConcurrent: requests sent at the same moment are checked
// one after another, so they cannot all pass the throttle before any
// failure is recorded. Without the sign-in gate, all 20 guesses on one
// account were compared (and 30 on different accounts from one address).
func TestLoginThrottleConcurrent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, _ := throttleStore(t, e)
		race := func(n int, email func(i int) string) map[string]int {
			got := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], _ = tryLogin(t, s, email(i), "wrong wrong wrong", "10.0.0.9")
				}()
			}
			wg.Wait()
			count := map[string]int{}
			for _, g := range got {
				count[g]++
			}
			return count
		}
		// One account, one address, frozen clock: three failures, then the
		// account's delay (1 s after the address's own last failure) refuses.
		// (Waiting longer than loginGateWait for the gate is also answered
		// "throttled": on a slow machine fewer than the limit are compared,
		// never more.)
		if got := race(20, func(int) string { return "owner@example.com" }); got["bad"] > 3 || got["bad"] == 0 || got["bad"]+got["throttled"] != 20 {
			t.Errorf("20 guesses at once on one account: %v, want at most 3 compared and the rest throttled", got)
		}
		// From another address, many accounts: the address's limit holds.
		s2, _ := throttleStore(t, e)
		s = s2
		if got := race(30, func(i int) string { return fmt.Sprintf("nobody%d@example.com", i) }); got["bad"] > 20 || got["bad"] == 0 || got["bad"]+got["throttled"] != 30 {
			t.Errorf("30 guesses at once from one address: %v, want at most 20 compared and the rest throttled", got)
		}
	})
}

// TestLoginThrottleFloodSparesTheOwner: one address flooding an account
// with sign-ins at once must not keep its owner, signing in correctly from
// elsewhere, from getting in. Sign-in took the account's gate before the
// address's, so every request of the flood queued on the account's gate
// beside the owner's, who won it about once in as many tries as the flood
// had requests in flight and was answered "try again in 1 second" after
// loginGateWait: a lockout anyone could cause with enough connections.
// The address's gate comes first now: a flood from one address waits
// there, and holds the account's gate one request at a time.
func TestLoginThrottleFloodSparesTheOwner(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		// A clock that takes its time makes each check hold its gates for
		// as long, as a busy database would.
		var slow atomic.Bool
		s := storetest.Open(t, e, store.Options{Clock: func() time.Time {
			if slow.Load() {
				time.Sleep(300 * time.Millisecond)
			}
			return t0
		}})
		if _, err := s.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "owner@example.com", Password: ownerPassword,
			Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		slow.Store(true)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					_, _, _ = s.Login(context.Background(), "owner@example.com", "wrong wrong wrong", "203.0.113.66", store.SessionPolicy{})
				}
			}()
		}
		time.Sleep(time.Second) // the flood is under way
		_, _, err := s.Login(context.Background(), "owner@example.com", ownerPassword, "192.0.2.1", store.SessionPolicy{})
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Errorf("the owner, from its own address, during a flood from another: %v; want signed in", err)
		}
	})
}

// twoSignInInstances are two stores on one new database, as two instances of
// Limbo sharing it, with the owner's account.
func twoSignInInstances(t *testing.T, e store.Engine, clk *storetest.Clock) (*store.Store, *store.Store) {
	t.Helper()
	url := storetest.URL(t, e)
	open := func() *store.Store {
		s, err := store.Open(context.Background(), url, store.Options{Clock: clk.Now, AuditKey: storetest.AuditKey,
			MaxConns: storetest.MaxConns, Resolve: storetest.Resolver(nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	if _, err := a.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "owner@example.com", Password: ownerPassword,
		Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestLoginThrottleConcurrentAcrossInstances: guesses sent at once to two
// instances are checked one after another too. Each instance's gate let
// one of its own through at a time, so the two checked the throttle side
// by side and an attacker got a guess more per instance than the limit.
func TestLoginThrottleConcurrentAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoSignInInstances(t, e, storetest.NewClock(t0))
		got := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := a
				if i%2 == 1 {
					s = b
				}
				g, _ := tryLogin(t, s, "owner@example.com", "wrong wrong wrong", "10.0.0.9")
				mu.Lock()
				got[g]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// As on one instance (TestLoginThrottleConcurrent): three failures,
		// then the account's delay refuses.
		if got["bad"] > 3 || got["bad"] == 0 || got["bad"]+got["throttled"] != 40 {
			t.Errorf("40 guesses at once on one account, half on each instance: %v, want at most 3 compared and the rest throttled", got)
		}
	})
}

// TestLoginThrottleCountAcrossInstances: two instances refusing the same
// pair at once count every refusal of the period between them. Each read
// the count, then wrote it plus one, so one's refusals overwrote the
// other's: the period's 10th and 100th refusals were audited twice, or
// not at all. The database counts them now.
func TestLoginThrottleCountAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		a, b := twoSignInInstances(t, e, clk)
		const addr = "10.0.3.1"
		for range 5 {
			wantLogin(t, a, "owner@example.com", "wrong wrong wrong", addr, "bad", 0)
			clk.Advance(4 * time.Second)
		}
		// The pair is refused now, on both instances: 50 refusals each,
		// the two at once (each instance's own gate takes its one by one).
		var wg sync.WaitGroup
		for _, s := range []*store.Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if got, _ := tryLogin(t, s, "owner@example.com", ownerPassword, addr); got != "throttled" {
						t.Errorf("the refused pair: %s", got)
						return
					}
				}
			}()
		}
		wg.Wait()
		var got []string
		evs, err := a.AuditEvents(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Action == "login.throttled" || ev.Action == "login.still_throttled" {
				var d struct{ Refusals int64 }
				if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %d", ev.Action, d.Refusals))
			}
		}
		if want := []string{"login.throttled 0", "login.still_throttled 10", "login.still_throttled 100"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("100 refusals on two instances audited as %v, want %v", got, want)
		}
		if rep := storetest.Sealed(t, a); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestLoginGateLeaseAcrossInstances: a sign-in waits while another
// instance holds its account's lease, and is answered "busy" (throttled,
// 1 s) after loginGateWait; a lease whose holder died is taken over once
// it is over, so the account is not locked out for good.
func TestLoginGateLeaseAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, _ := throttleStore(t, e)
		hold := func(until time.Time) {
			t.Helper()
			if _, err := s.DB().Exec(s.DB().Rebind(`INSERT INTO login_gates (name, holder, until) VALUES ('acct:owner@example.com', 'another instance', ?)
ON CONFLICT (name) DO UPDATE SET until = excluded.until`), until.UTC()); err != nil {
				t.Fatal(err)
			}
		}
		hold(time.Now().Add(time.Hour))
		if got, wait := tryLogin(t, s, "owner@example.com", ownerPassword, "10.0.0.1"); got != "throttled" || wait != time.Second {
			t.Errorf("while another instance checks the account: %s (wait %v), want throttled (1s)", got, wait)
		}
		if n := s.LoginRefusals()[store.RefusedBusy]; n != 1 {
			t.Errorf("busy refusals counted: %d, want 1", n)
		}
		hold(time.Now().Add(-time.Second)) // its holder died, its lease over
		wantLogin(t, s, "owner@example.com", ownerPassword, "10.0.0.1", "ok", 0)
		var left int
		if err := s.DB().Get(&left, `SELECT COUNT(*) FROM login_gates`); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("%d leases left after the sign-in, want 0", left)
		}
	})
}

// TestLoginEmailNoAccountCanHave: an email with NUL, invalid UTF-8 or
// more characters than an account's is refused as invalid on both
// engines, with nothing counted or audited. PostgreSQL failed the
// sign-in with an error (it cannot store NUL or invalid UTF-8), where
// SQLite answered "wrong email or password".
func TestLoginEmailNoAccountCanHave(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, _ := throttleStore(t, e)
		before := loginEvents(t, s)
		for _, email := range []string{"owner@example.com\x00", "a\x00b@example.com", "\xff@example.com", strings.Repeat("a", 5000) + "@example.com"} {
			for range 30 { // past every limit, had they counted
				if _, _, err := s.Login(context.Background(), email, "wrong wrong wrong", "10.0.0.1", store.SessionPolicy{}); !errors.Is(err, review.ErrInvalid) {
					t.Fatalf("sign-in as %.40q: %v, want invalid", email, err)
				}
			}
		}
		if after := loginEvents(t, s); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("login events %v, then %v: nothing should be audited", before, after)
		}
		wantLogin(t, s, "owner@example.com", ownerPassword, "10.0.0.1", "ok", 0)
	})
}

// signInWith signs in to email from addr with the browser's device token
// (device, "" for none) and sorts the answer as tryLogin does; on success
// it also returns the token the browser is to hold.
func signInWith(t *testing.T, s *store.Store, email, password, addr, device string) (string, time.Duration, string) {
	t.Helper()
	_, _, token, err := s.LoginWithDevice(context.Background(), email, password, addr, device, store.SessionPolicy{})
	var th *store.ThrottledError
	switch {
	case err == nil:
		if token == "" {
			t.Fatalf("a sign-in to %s gave no device token", email)
		}
		return "ok", 0, token
	case errors.Is(err, store.ErrBadCredentials):
		return "bad", 0, ""
	case errors.As(err, &th):
		return "throttled", th.RetryAfter, ""
	}
	t.Fatalf("LoginWithDevice(%s, %s): %v", email, addr, err)
	return "", 0, ""
}

// TestLoginDeviceOutlastsAGuesserAtTheSameAddress: behind one office NAT,
// a colleague failing five times on the owner's account refused it at that
// address for 15 minutes — to the owner too, though they had signed in
// there every day. Now the browser the owner signed in with holds a device
// token, and with it only its own failures count: the guesser is refused,
// the owner is not. The token is no pass: its own five failures refuse it
// (rule "device") until they age out, while the guesser's limits are not
// touched by them; a token for another account (the guesser's own) or a
// made-up one counts as none; a token not used for deviceFor lapses, and a
// password reset or disabling the user forgets them all. On both engines.
func TestLoginDeviceOutlastsAGuesserAtTheSameAddress(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s, clk := throttleStore(t, e)
		const owner, office = "owner@example.com", "198.51.100.7"
		if _, err := s.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "guesser@example.com", Password: ownerPassword,
			Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		want := func(got string, wait time.Duration, wantGot string, wantWait time.Duration, what string) {
			t.Helper()
			if got != wantGot || wait != wantWait {
				t.Fatalf("%s: %s (wait %v), want %s (wait %v)", what, got, wait, wantGot, wantWait)
			}
		}
		// failFive fails five times at the office, three seconds in all:
		// the delay after the third, then the pair (or the token) refused.
		failFive := func(password, token, what string) {
			t.Helper()
			for _, step := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
				clk.Advance(step)
				got, wait, _ := signInWith(t, s, owner, password, office, token)
				want(got, wait, "bad", 0, what)
			}
		}
		got, wait, token := signInWith(t, s, owner, ownerPassword, office, "")
		want(got, wait, "ok", 0, "the owner's first sign-in")
		_, _, guesserToken := signInWith(t, s, "guesser@example.com", ownerPassword, office, "")

		// The guesser fails five times on the owner's account: the account
		// × address is refused, with a token of their own or a made-up one.
		failFive("guess guess guess", guesserToken, "a guess")
		for _, tok := range []string{"", guesserToken, "made-up-token", token + "x"} {
			got, wait, _ = signInWith(t, s, owner, ownerPassword, office, tok)
			want(got, wait, "throttled", 15*time.Minute-3*time.Second, fmt.Sprintf("the right password without the owner's token (%.8q)", tok))
		}
		// The owner's browser signs in, and keeps its token.
		got, wait, again := signInWith(t, s, owner, ownerPassword, office, token)
		want(got, wait, "ok", 0, "the owner with their browser's token, the address refused to others")
		if again != token {
			t.Errorf("the token was replaced at a sign-in with it")
		}

		// The token's own failures: the delay after the third, refused after
		// the fifth, even with the right password, until they age out.
		failFive("typo typo typo", token, "a typo with the token")
		got, wait, _ = signInWith(t, s, owner, ownerPassword, office, token)
		want(got, wait, "throttled", 15*time.Minute-3*time.Second, "the token after five failures of its own")
		// The trail tells the browser's typos from the guesses.
		evs, err := s.AuditEvents(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		typos, guesses := 0, 0
		for _, ev := range evs {
			if ev.Action == "login.failed" && strings.Contains(string(ev.Detail), `"known_browser":true`) {
				typos++
			} else if ev.Action == "login.failed" {
				guesses++
			}
		}
		if typos != 5 || guesses != 5 {
			t.Errorf("login.failed events: %d from the known browser, %d without; want 5 and 5", typos, guesses)
		}
		// Which did not count against the account elsewhere.
		got, wait, _ = signInWith(t, s, owner, ownerPassword, "203.0.113.9", "")
		want(got, wait, "ok", 0, "the owner from another address")
		clk.Advance(15 * time.Minute)
		got, wait, _ = signInWith(t, s, owner, ownerPassword, office, token)
		want(got, wait, "ok", 0, "the token once its failures aged out")

		// Not used for deviceFor: it lapses, and a new one is given.
		clk.Advance(store.DeviceTokenLife + time.Minute)
		got, wait, fresh := signInWith(t, s, owner, ownerPassword, office, token)
		want(got, wait, "ok", 0, "a sign-in with a lapsed token")
		if fresh == token {
			t.Errorf("a lapsed token was kept")
		}

		// A password reset (the old one leaked: whoever signed in with it
		// holds a token) forgets the account's tokens.
		u, err := s.UserByEmail(context.Background(), owner)
		if err != nil {
			t.Fatal(err)
		}
		const newPassword = "a brand new password"
		if _, err := s.ResetPassword(context.Background(), review.Operator("test"), u.ID, newPassword); err != nil {
			t.Fatal(err)
		}
		failFive("guess guess guess", "", "a guess after the reset")
		got, wait, _ = signInWith(t, s, owner, newPassword, office, fresh)
		want(got, wait, "throttled", 15*time.Minute-3*time.Second, "a token from before the reset, the pair refused")

		// Disabling the user forgets them too: enabled again, its browsers
		// start over.
		clk.Advance(15 * time.Minute)
		got, wait, latest := signInWith(t, s, owner, newPassword, office, "")
		want(got, wait, "ok", 0, "a sign-in once the guesses aged out")
		for _, disabled := range []bool{true, false} {
			if _, err := s.UpdateUser(context.Background(), review.Operator("test"), u.ID,
				store.UserChange{Role: u.Role, Scope: review.Scope{All: true}, Disabled: disabled}); err != nil {
				t.Fatal(err)
			}
		}
		failFive("guess guess guess", "", "a guess after the user was enabled again")
		got, wait, _ = signInWith(t, s, owner, newPassword, office, latest)
		want(got, wait, "throttled", 15*time.Minute-3*time.Second, "a token from before the user was disabled, the pair refused")
		if n := loginEvents(t, s); n["login.throttled"] < 2 {
			t.Errorf("audit: %v; want the refusals of the pair and of the token audited", n)
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}
