package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// sseEvent is one Server-Sent Event read off a stream.
type sseEvent struct {
	name string
	data map[string]any
}

// openStream opens GET /events as an EventSource would, checks it is a
// stream, and delivers its events (comments skipped) until it ends, when
// the channel closes. The stream is closed at cleanup.
func (b *browser) openStream(t *testing.T) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET /events: %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		r := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return out
}

func nextSSE(t *testing.T, ch <-chan sseEvent, who string) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the stream ended", who)
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no event within 5 s", who)
	}
	return sseEvent{}
}

func noSSE(t *testing.T, ch <-chan sseEvent, who string) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Errorf("%s: got %+v, want nothing", who, ev)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestLiveEventStream: GET /events streams the case changes of the user's
// tenants only, saying which were the user's own; a plain GET is 406 at
// once; /cases/:id/live says the case's state; and the server's shutdown
// ends the streams (EndStreams), so nothing waits for them.
func TestLiveEventStream(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		var h *handlers.Handlers
		srv, st := consoleServer(t, e, func(x *handlers.Handlers) { h = x })
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "other@example.com", Password: "correct horse battery",
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"other"}}}); err != nil {
			t.Fatal(err)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		oth := newBrowser(t, srv.URL)
		oth.login("other@example.com")

		if code, _ := rev.get("/events"); code != http.StatusNotAcceptable {
			t.Errorf("GET /events without Accept: text/event-stream: %d, want 406 at once", code)
		}
		mine := rev.openStream(t)
		theirs := oth.openStream(t)

		caseID := needsReview(t, st, "live-1")
		ev := nextSSE(t, mine, "reviewer")
		if ev.name != "case" || ev.data["case_id"] != caseID || ev.data["kind"] != "opened" || ev.data["tenant"] != "acme" || ev.data["version"] != 1.0 {
			t.Errorf("the opened case's event: %+v", ev)
		}
		noSSE(t, theirs, "another tenant's reviewer")

		_, page := rev.get("/cases/" + caseID)
		if !strings.Contains(page, `id="live-case"`) || !strings.Contains(page, `data-case-version="1"`) {
			t.Errorf("the case page has no live region with its version")
		}
		if code, _, _ := rev.post("/cases/"+caseID+"/claim", url.Values{"csrf": {rev.csrf}}); code >= 400 {
			t.Fatalf("claim: %d", code)
		}
		ev = nextSSE(t, mine, "reviewer")
		if ev.data["kind"] != "claimed" || ev.data["actor"] != "reviewer@example.com" || ev.data["mine"] != true || ev.data["version"] != 2.0 {
			t.Errorf("the claim's event: %+v", ev)
		}
		noSSE(t, theirs, "another tenant's reviewer")

		code, body := rev.get("/cases/" + caseID + "/live")
		var state map[string]any
		if err := json.Unmarshal([]byte(body), &state); code != http.StatusOK || err != nil ||
			state["status"] != "open" || state["version"] != 2.0 || state["holder"] != "reviewer@example.com" {
			t.Errorf("GET /cases/%s/live: %d %s", caseID, code, body)
		}

		// Shutdown ends the streams at once, and refuses new ones.
		h.EndStreams()
		for _, ch := range []<-chan sseEvent{mine, theirs} {
			select {
			case _, ok := <-ch:
				if ok {
					t.Error("an event after EndStreams")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a stream outlived EndStreams")
			}
		}
	})
}

// TestLiveStreamEndsWithItsSession: a stream open when its user is
// disabled or loses a tenant says "end" at the next case change and
// stops, rather than sending that tenant's case until the heartbeat
// checks the session.
func TestLiveStreamEndsWithItsSession(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		u, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "two@example.com", Password: "correct horse battery",
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"ta", "tb"}}})
		if err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, srv.URL)
		b.login("two@example.com")
		events := b.openStream(t)
		if _, err := st.UpdateUser(ctx, review.Operator("root"), u.ID, store.UserChange{Role: review.RoleReviewer,
			Scope: review.Scope{Tenants: []string{"ta"}}}); err != nil {
			t.Fatal(err)
		}
		caseB := needsReviewOn(t, st, "tb", "dest-tb", "src-tb")
		if ev := nextSSE(t, events, "a user who no longer holds tb"); ev.name != "end" {
			t.Fatalf("got %+v after the user lost tb (case %s), want the stream's end", ev, caseB)
		}
		select {
		case ev, ok := <-events:
			if ok {
				t.Errorf("after its end, the stream sent %+v", ev)
			}
		case <-time.After(5 * time.Second):
			t.Error("the stream stayed open after its end")
		}
	})
}
