package metrics_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestMiddlewareSkipsStreams: a page is timed by its route; an event
// stream, which lasts as long as the page that reads it, is not.
func TestMiddlewareSkipsStreams(t *testing.T) {
	st := storetest.Open(t, store.SQLite, store.Options{})
	m := metrics.New(st, nil)
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/page", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/refused", func(c echo.Context) error { return errors.New("a handler's own error, answered 500") })
	e.GET("/events", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		return c.String(http.StatusOK, "data: x\n\n")
	})
	for _, p := range []string{"/page", "/refused", "/events"} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var routes, codes []string
	for _, f := range families {
		if f.GetName() != "limbo_http_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "route":
					routes = append(routes, l.GetValue())
				case "code":
					codes = append(codes, l.GetValue())
				}
			}
		}
	}
	if fmt.Sprint(routes, codes) != "[/page /refused] [2xx 5xx]" {
		t.Fatalf("latency series for %v %v, want /page 2xx and /refused 5xx (the status sent), not the stream", routes, codes)
	}
}

// TestMiddlewareMethodLabel: the method label takes the methods HTTP
// defines; any other name a client sends is "other". It took the
// request's method as sent, and net/http accepts any token as a method,
// so anyone, signed in or not, made a new series per made-up method:
// /metrics and the process's memory grew without bound.
func TestMiddlewareMethodLabel(t *testing.T) {
	st := storetest.Open(t, store.SQLite, store.Options{})
	m := metrics.New(st, nil)
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/page", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	for i := range 50 {
		for _, p := range []string{"/page", "/nowhere"} {
			e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(fmt.Sprintf("MADEUP%d", i), p, nil))
		}
	}
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/page", nil))
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "limbo_http_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "method" {
					methods[l.GetValue()] = true
				}
			}
		}
	}
	if len(methods) != 2 || !methods["GET"] || !methods["other"] {
		t.Fatalf("method labels %v, want GET and other", methods)
	}
}
