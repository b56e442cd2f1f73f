// Limbo console: keyboard navigation of the queue (j/k to move, Enter to
// open). No inline script anywhere: the CSP allows only files from /static.
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
