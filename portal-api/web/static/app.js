// Strata's pages work without this script; it only refreshes in place.
// An element with data-refresh="<url>" and data-every="<seconds>" is
// swapped for a fresh copy from <url> (the same page's fragment) through
// htmx, only while the tab is visible: a hidden tab asks nothing, and on
// becoming visible again it refreshes at once. Focus and scroll stay,
// since only the element's own content is swapped and an element that
// holds focus is left for the next turn.
(function () {
  "use strict";
  var timers = [];
  function refresh(el) {
    if (document.visibilityState !== "visible" || !window.htmx) { return; }
    if (el.contains(document.activeElement) && document.activeElement !== document.body) { return; }
    window.htmx.ajax("GET", el.getAttribute("data-refresh"), { target: el, swap: "innerHTML" });
  }
  function start() {
    stop();
    document.querySelectorAll("[data-refresh]").forEach(function (el) {
      var every = Math.max(5, parseInt(el.getAttribute("data-every") || "15", 10)) * 1000;
      timers.push(window.setInterval(function () { refresh(el); }, every));
    });
  }
  function stop() {
    timers.forEach(function (t) { window.clearInterval(t); });
    timers = [];
  }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      document.querySelectorAll("[data-refresh]").forEach(refresh);
      start();
    } else {
      stop();
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    if (document.visibilityState === "visible") { start(); }
  });
}());
