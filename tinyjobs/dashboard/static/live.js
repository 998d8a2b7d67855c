// tinyjobs dashboard: live numbers without a full reload, and confirmations. No dependencies,
// no inline script (the Content-Security-Policy forbids it): this file is the only script.
//
// Every few seconds (body[data-live-interval]) the page fetches itself and swaps each element
// marked [data-live] for its fresh copy, unless the visitor is using it (a checked box, focus,
// an open <details>). The button #live-toggle pauses it; the choice is kept in localStorage.
// Nothing is fetched while the tab is hidden.
(function () {
  "use strict";
  var KEY = "tinyjobs-live";
  var body = document.body;
  var seconds = parseFloat(body.getAttribute("data-live-interval")) || 5;
  var toggle = document.getElementById("live-toggle");
  var busy = false;

  function paused() {
    try { return localStorage.getItem(KEY) === "paused"; } catch (e) { return false; }
  }

  function showState() {
    if (!toggle) return;
    var p = paused();
    toggle.textContent = p ? "paused" : "live";
    toggle.setAttribute("aria-pressed", p ? "true" : "false");
    toggle.classList.toggle("is-paused", p);
  }

  function inUse(el) {
    return !!(el.querySelector("input:checked, details[open]") ||
              (document.activeElement && el.contains(document.activeElement) && document.activeElement !== body));
  }

  function refresh() {
    if (busy || paused() || document.hidden) return;
    var regions = document.querySelectorAll("[data-live][id]");
    if (!regions.length) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var fresh = new DOMParser().parseFromString(html, "text/html");
        regions.forEach(function (el) {
          var next = fresh.getElementById(el.id);
          if (next && !inUse(el)) el.replaceWith(document.importNode(next, true));
        });
        body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { busy = false; });
  }

  if (toggle) {
    toggle.addEventListener("click", function () {
      try { localStorage.setItem(KEY, paused() ? "on" : "paused"); } catch (e) { /* private mode */ }
      showState();
    });
  }
  showState();
  window.setInterval(refresh, seconds * 1000);

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var message = form.getAttribute("data-confirm");
    if (form.id === "bulk") {
      var n = document.querySelectorAll('input[name="id"][form="bulk"]:checked').length;
      var action = form.querySelector('select[name="action"]').value;
      if (!n) { window.alert("Select jobs first."); event.preventDefault(); return; }
      message = action + " " + n + " selected job(s)?";
    }
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
