// Limbo console: keyboard navigation of the queue (j/k to move, Enter to
// open; not while a dialog is open). No inline script anywhere: the CSP
// allows only files from /static.
(function () {
  "use strict";
  var current = -1;
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("table.queue tbody tr.row")); }
  function mark(i) {
    var rs = rows();
    if (rs.length === 0) { return; }
    current = Math.max(0, Math.min(i, rs.length - 1));
    rs.forEach(function (r, j) { r.classList.toggle("current", j === current); });
    var link = rs[current].querySelector("a");
    if (link) { link.focus(); }
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) { return; }
    if (e.ctrlKey || e.metaKey || e.altKey || document.querySelector("dialog[open]")) { return; }
    if (e.key === "j") { mark(current + 1); e.preventDefault(); }
    if (e.key === "k") { mark(current - 1); e.preventDefault(); }
    // Enter opens the selected row, unless focus is on another control
    // (a button or link elsewhere keeps its own Enter). The default is
    // prevented so the focused row link does not start a second navigation.
    if (e.key === "Enter" && current >= 0 && (t === document.body || (t.closest && t.closest("tr.row.current")))) {
      var link = rows()[current] && rows()[current].querySelector("a");
      if (link) { e.preventDefault(); window.location.href = link.getAttribute("href"); }
    }
  });
  // The live queue is replaced every few seconds; keep the selection.
  document.addEventListener("htmx:afterSwap", function () { if (current >= 0) { mark(current); } });
})();

// Keyboard help: "?" (or the header's button, revealed here: without
// JavaScript there are no shortcuts, so nothing offers a list of them)
// opens the dialog listing the shortcuts, modal, focus on its Close
// button. Esc closes it (the browser's own for a modal dialog), as does
// Close; focus then goes back where it was. "/" puts the cursor in the
// page's search field.
(function () {
  "use strict";
  var dialog = document.getElementById("shortcuts");
  if (!dialog || typeof dialog.showModal !== "function") { return; }
  var opener = document.querySelector("button.shortcuts-open");
  var close = dialog.querySelector("button.shortcuts-close");
  var back = null;
  function open() {
    if (dialog.open) { return; }
    back = document.activeElement;
    dialog.showModal();
    if (close) { close.focus(); }
  }
  // The close event comes after the dialog has closed, and may come after
  // the person has moved on (input goes first when the browser is busy):
  // focus goes back only if it is lost, on the body or still in the
  // dialog. Browsers that put it back themselves have done so already.
  dialog.addEventListener("close", function () {
    var now = document.activeElement;
    var lost = !now || now === document.body || dialog.contains(now);
    if (lost && back && back.focus && document.contains(back)) { back.focus(); }
    back = null;
  });
  if (close) { close.addEventListener("click", function () { dialog.close(); }); }
  if (opener) {
    opener.hidden = false;
    opener.addEventListener("click", open);
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey || dialog.open) { return; }
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) { return; }
    if (e.key === "?") { e.preventDefault(); open(); }
    if (e.key === "/") {
      var search = document.querySelector("main form[role=search] input:not([type=hidden])");
      if (search) { e.preventDefault(); search.focus(); search.select(); }
    }
  });
})();

// Times: the server writes each <time datetime> in UTC; here it is shown in
// the viewer's own zone, named, with the time since ("3 min ago"), in the
// page's language. Refreshed every half minute and after each htmx swap.
(function () {
  "use strict";
  var lang = document.documentElement.lang || "en";
  var abs, rel;
  try {
    // (dateStyle/timeStyle cannot be combined with timeZoneName: the
    // constructor throws, so the fields are named one by one.)
    abs = new Intl.DateTimeFormat(lang, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
    rel = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
  } catch (e) { return; }
  var units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
  function since(d) {
    var s = (d.getTime() - Date.now()) / 1000;
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(s) >= units[i][1] || units[i][0] === "second") {
        return rel.format(Math.round(s / units[i][1]), units[i][0]);
      }
    }
    return "";
  }
  function localise(root) {
    var ts = (root || document).querySelectorAll("time[datetime]");
    Array.prototype.forEach.call(ts, function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      t.textContent = abs.format(d) + " (" + since(d) + ")";
      t.title = t.getAttribute("datetime");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSwap", function (e) { localise(e.target); });
  setInterval(function () { localise(document); }, 30000);
})();

// Copy buttons: data-copy holds the exact value (an id, a key, a hash).
document.addEventListener("click", function (e) {
  var b = e.target.closest ? e.target.closest("button.copy[data-copy]") : null;
  if (!b || !navigator.clipboard) { return; }
  navigator.clipboard.writeText(b.getAttribute("data-copy")).then(function () {
    b.classList.add("copied");
    setTimeout(function () { b.classList.remove("copied"); }, 1500);
  });
});

// Still here: typing a reason or changing a choice in a console form is
// use of the session, though it asks the server nothing until the form
// is sent, and the page's own polls do not count (handlers.backgroundPoll).
// So genuine input (isTrusted: a person's, not a script's) sends POST
// /session/still-here, at most once a minute, and a reviewer who spends
// longer than the idle limit writing a careful reason is still signed in
// when they press the button. An ended session stays ended (the answer is
// then a redirect, not followed). <html data-still-here> counts the
// answers (tests wait on it).
(function () {
  "use strict";
  var EVERY = 60000;
  var last = 0;
  function token() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || ""; } catch (e) { return ""; }
  }
  function input(e) {
    if (!e.isTrusted || !e.target || !e.target.closest || !e.target.closest("form")) { return; }
    var now = Date.now();
    if (now - last < EVERY || !window.fetch) { return; }
    var csrf = token();
    if (!csrf) { return; } // signed out (the sign-in form): no session to keep
    last = now;
    fetch("/session/still-here", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin", redirect: "manual" })
      .then(function () {
        var n = parseInt(document.documentElement.getAttribute("data-still-here"), 10) || 0;
        document.documentElement.setAttribute("data-still-here", String(n + 1));
      })
      .catch(function () {});
  }
  document.addEventListener("input", input, true);
  document.addEventListener("change", input, true);
})();

// Forms sent after the session ended. The server does not act on them: it
// answers with the sign-in form. What was filled in is kept in this tab's
// sessionStorage as it goes (never a password, never the CSRF token), with
// where it was written and by whom; back there as that user, it is filled
// in again with a note, and nothing is sent until the user sends it.
// Another user signing in in this tab never sees it. Two kinds share the
// helpers below: the case's decision panel (htmx) and plain forms.
(function () {
  "use strict";

  // draftFields is what form would send, as [name, value] pairs in order.
  function draftFields(form) {
    var fields = [];
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name === "csrf" || el.type === "password" || ((el.type === "radio" || el.type === "checkbox") && !el.checked)) { return; }
      fields.push([el.name, el.value]);
    });
    return fields;
  }

  // refill puts fields back into form. A choice not saved ends unchecked
  // (the form then asks for one), never left at the page's default; a
  // name given to several fields (hidden lists) gets its values back one
  // each, in the order they were sent.
  function refill(form, fields) {
    var values = {};
    (fields || []).forEach(function (f) { (values[f[0]] = values[f[0]] || []).push(f[1]); });
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name === "csrf" || el.type === "password") { return; }
      var vs = values[el.name] || [];
      if (el.type === "radio" || el.type === "checkbox") {
        el.checked = vs.indexOf(el.value) >= 0;
      } else if (vs.length > 0) {
        el.value = vs.shift();
      }
    });
  }

  function note(text, attr) {
    var n = document.createElement("p");
    n.className = "situation";
    n.setAttribute("role", "alert");
    n.setAttribute(attr, "");
    n.textContent = text;
    return n;
  }

  function load(key) {
    try { return JSON.parse(sessionStorage.getItem(key) || "null"); } catch (x) { return null; }
  }
  function save(key, v) {
    try { sessionStorage.setItem(key, JSON.stringify(v)); } catch (x) {}
  }

  // The decision panel's form, sent by htmx: requireUser answers 401 and
  // HX-Redirect to the sign-in form, which then brings the reviewer back
  // to the case. Kept before htmx follows that redirect, with the case;
  // filled in again on that case's page, the versions it was written
  // against included (a case that changed meanwhile still refuses it as
  // stale). When the case no longer takes a decision, what they wrote is
  // shown instead.
  var DECISION = "limbo.unsent-decision";
  function panel() { return document.getElementById("decision"); }
  document.addEventListener("htmx:beforeOnLoad", function (e) {
    var d = e.detail || {};
    var form = d.elt;
    var p = panel();
    if (!d.xhr || d.xhr.status !== 401 || !d.xhr.getResponseHeader("HX-Redirect")) { return; }
    if (!form || !form.matches || !form.matches("form.decision") || !p || !p.contains(form)) { return; }
    save(DECISION, { caseId: p.getAttribute("data-draft-case"), user: p.getAttribute("data-draft-user"), fields: draftFields(form) });
  });
  document.addEventListener("DOMContentLoaded", function () {
    var p = panel();
    if (!p || !p.getAttribute("data-draft-case")) { return; }
    var draft = load(DECISION);
    if (!draft || draft.caseId !== p.getAttribute("data-draft-case")) { return; } // another case's: kept for it
    sessionStorage.removeItem(DECISION);
    if (draft.user !== p.getAttribute("data-draft-user")) { return; } // another user's: never shown
    var form = p.querySelector("form.decision");
    if (!form) {
      p.appendChild(note(p.getAttribute("data-msg-draft-unsent") || "", "data-draft-note"));
      var q = document.createElement("blockquote");
      q.setAttribute("data-draft-unsent", "");
      q.textContent = (draft.fields || []).filter(function (f) { return f[0] === "action" || f[0] === "reason"; })
        .map(function (f) { return f[1]; }).join(": ");
      p.appendChild(q);
      return;
    }
    refill(form, draft.fields);
    form.insertBefore(note(p.getAttribute("data-msg-draft-restored") || "", "data-draft-note"), form.firstChild);
  });

  // A plain form (the bulk decision, the administration's forms) sent
  // without htmx is answered with the sign-in page, and the page it was
  // on is gone. Kept as it is sent, with its page; the sign-in page marks
  // it as sent into a sign-in. Filled in again on that page, hidden fields
  // included (a form that went stale meanwhile is still refused as
  // stale), its <details> opened. Any other page drops it: the form was
  // answered.
  var PLAIN = "limbo.unsent-form";
  function user() { return document.body.getAttribute("data-user") || ""; }
  function here() { return location.pathname + location.search; }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.matches || !form.matches("form.decision") || form.hasAttribute("hx-post") ||
        (form.getAttribute("method") || "").toLowerCase() !== "post" || !user()) { return; }
    save(PLAIN, { page: here(), action: form.getAttribute("action"), user: user(), fields: draftFields(form), signIn: false });
  }, true);
  document.addEventListener("DOMContentLoaded", function () {
    var d = load(PLAIN);
    if (!d) { return; }
    if (location.pathname === "/login") {
      d.signIn = true;
      save(PLAIN, d);
      return;
    }
    sessionStorage.removeItem(PLAIN);
    if (!d.signIn || d.user !== user() || d.page !== here()) { return; }
    var form = null;
    Array.prototype.forEach.call(document.querySelectorAll("form.decision"), function (f) {
      if (!form && f.getAttribute("action") === d.action && !f.hasAttribute("hx-post")) { form = f; }
    });
    if (!form) { return; }
    refill(form, d.fields);
    form.insertBefore(note(document.body.getAttribute("data-msg-form-restored") || "", "data-form-restored"), form.firstChild);
    for (var p = form.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
  });
})();
