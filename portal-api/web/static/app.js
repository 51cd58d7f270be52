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

// A <time data-countdown datetime="..."> counts down to its time, in the
// page's words: data-hm ("{h} h {m} min") and data-m ("{m} min") as the
// server wrote them, data-due once the time has come. The server renders
// the same words; this keeps them current between loads, each minute,
// only while the tab is visible.
(function () {
  "use strict";
  function tick() {
    if (document.visibilityState !== "visible") { return; }
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      var secs = Math.floor((at - Date.now()) / 1000);
      var text;
      if (secs <= 0) {
        text = el.getAttribute("data-due");
      } else {
        var h = Math.floor(secs / 3600), m = Math.floor((secs % 3600) / 60);
        text = h > 0 ? el.getAttribute("data-hm").replace("{h}", h).replace("{m}", m) : el.getAttribute("data-m").replace("{m}", m);
      }
      if (text && el.textContent !== text) { el.textContent = text; }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    window.setInterval(tick, 15000);
  });
  document.addEventListener("visibilitychange", tick);
  // A region refreshed in place brings the server's words: count again.
  document.addEventListener("htmx:after:swap", tick);
}());
