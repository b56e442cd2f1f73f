// Limbo console: live updates (handlers/live.go). On the queue and on a
// case page an EventSource listens to /events, one event per committed
// change to a case of the user's tenants, from whichever Limbo instance
// made it:
//   - the queue refreshes its table at once (the "live-refresh" event its
//     hx-trigger listens for);
//   - a case page, when its own case changed elsewhere, shows a banner in
//     its live region (#live-case, role=alert) saying how, with a reload
//     link, and disables the decision forms when they can only be refused
//     (decided, closed, claimed or taken over by someone).
// Fallbacks: the queue keeps its htmx polling (every 5 s; while the stream
// is open only one poll in 30 s goes out, as a safety net), and a case page
// polls /cases/:id/live (every 5 s without a stream, 30 s with one) and
// compares the version it was rendered at. Without JavaScript the server
// refuses a stale form by the versions it carries. <html data-live> says
// "open" while the stream is, "polling" otherwise (tests wait on it).
(function () {
  "use strict";
  var POLL = 5000, SAFETY = 30000, MAX_FAILURES = 5;
  var loaded = Date.now();
  var es = null, live = false, failures = 0;
  var lastQueueSwap = Date.now();
  var busy = 0, deferred = [];

  function queue() { return document.getElementById("queue"); }
  function caseEl() { return document.getElementById("live-case"); }
  function state(s) { document.documentElement.setAttribute("data-live", s); }

  // The queue: one refresh for a burst of events.
  var refreshTimer = null;
  function refreshQueue() {
    if (!queue() || refreshTimer || !window.htmx) { return; }
    refreshTimer = setTimeout(function () {
      refreshTimer = null;
      htmx.trigger(document.body, "live-refresh");
    }, 150);
  }
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target && e.target.id === "queue") { lastQueueSwap = Date.now(); }
  });
  // While the stream is open the 5 s poll is redundant: let one through
  // in 30 s. A poll has no triggering event; a live refresh has one.
  document.addEventListener("htmx:confirm", function (e) {
    var d = e.detail || {};
    if (live && d.elt && d.elt.id === "queue" && !d.triggeringEvent && Date.now() - lastQueueSwap < SAFETY) {
      e.preventDefault();
    }
  });

  // The case page. Severity: a banner that disables the forms is not
  // replaced by one that only informs.
  var disabling = { "decided": true, "closed": true, "taken-over": true, "claimed": true };
  function show(kind, who) {
    var el = caseEl();
    if (!el) { return; }
    var shown = el.getAttribute("data-shown");
    if (shown && (disabling[shown] || !disabling[kind])) { return; }
    var msg = (el.getAttribute("data-msg-" + kind) || "").replace("%s", who || "");
    var p = document.createElement("p");
    p.textContent = msg + " ";
    var a = document.createElement("a");
    a.href = location.pathname + location.search;
    a.textContent = el.getAttribute("data-msg-reload") || "";
    p.appendChild(a);
    el.textContent = "";
    el.appendChild(p);
    el.setAttribute("data-shown", kind);
    if (disabling[kind]) {
      var d = document.getElementById("decision");
      if (!d) { return; }
      Array.prototype.forEach.call(d.querySelectorAll("form"), function (f) {
        f.setAttribute("aria-disabled", "true");
        Array.prototype.forEach.call(f.querySelectorAll("input, button, select, textarea"), function (c) { c.disabled = true; });
      });
    }
  }
  function version(el) { return parseInt(el.getAttribute("data-case-version"), 10) || 0; }

  // An event about this case: acted on unless the page already shows it
  // (this tab's own claim or decision, swapped in by htmx). While this tab
  // has a request under way, events wait for its answer to be swapped in.
  function onCaseEvent(ev) {
    var el = caseEl();
    if (!el || ev.case_id !== el.getAttribute("data-case-id")) { return; }
    if (busy > 0) { deferred.push(ev); return; }
    if (ev.version && ev.version <= version(el)) { return; }
    switch (ev.kind) {
      case "decided": show("decided"); break;
      case "closed": show("closed"); break;
      case "taken_over": show("taken-over", ev.actor); break;
      case "claimed": show("claimed", ev.actor); break;
      default: show("changed");
    }
  }
  document.addEventListener("htmx:beforeRequest", function () { busy++; });
  document.addEventListener("htmx:afterRequest", function () {
    busy = Math.max(0, busy - 1);
    if (busy === 0) {
      var evs = deferred;
      deferred = [];
      evs.forEach(onCaseEvent);
    }
  });

  // The polling fallback of the case page.
  function pollCase() {
    var el = caseEl();
    if (!el || busy > 0 || !window.fetch) { return; }
    fetch("/cases/" + encodeURIComponent(el.getAttribute("data-case-id")) + "/live",
      { headers: { "Accept": "application/json" }, credentials: "same-origin", redirect: "error" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (st) {
        if (!st || caseEl() !== el || busy > 0 || st.version <= version(el)) { return; }
        var holder = el.getAttribute("data-case-holder") || "";
        if (st.status !== "open") {
          show((st.resolved_by || "").indexOf("system:") === 0 ? "closed" : "decided");
        } else if (st.holder && st.holder !== holder) {
          show(holder ? "taken-over" : "claimed", st.holder);
        } else {
          show("changed");
        }
      })
      .catch(function () {});
  }
  function schedulePoll() {
    setTimeout(function () { pollCase(); schedulePoll(); }, live ? SAFETY : POLL);
  }

  function connect() {
    if (!window.EventSource) { return; }
    es = new EventSource("/events");
    es.addEventListener("open", function () {
      var again = failures > 0;
      live = true;
      failures = 0;
      state("open");
      // What changed between the page's rendering and now went unheard.
      if (again || Date.now() - loaded > 1000) { refreshQueue(); }
      pollCase();
    });
    es.addEventListener("case", function (e) {
      var ev;
      try { ev = JSON.parse(e.data); } catch (x) { return; }
      refreshQueue();
      onCaseEvent(ev);
    });
    es.addEventListener("resync", function () { refreshQueue(); pollCase(); });
    es.addEventListener("end", function () { es.close(); es = null; live = false; state("polling"); });
    es.addEventListener("error", function () {
      live = false;
      failures++;
      state("polling");
      if (es && (es.readyState === EventSource.CLOSED || failures >= MAX_FAILURES)) {
        // Refused (503, signed out) or failing: poll, and try again later.
        es.close();
        es = null;
        if (failures < MAX_FAILURES) { setTimeout(connect, SAFETY); }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!queue() && !caseEl()) { return; }
    state("polling");
    connect();
    if (caseEl()) { schedulePoll(); }
  });
})();
