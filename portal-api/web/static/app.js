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

// Notices. The live region (#notices-live, data-notices="<url>") asks the
// server what changed for the user since its last poll (job and session
// starts, a session near its end, its idle limit or reclaimd's next step)
// every 30 s while the tab is visible, and at once when it is shown
// again; the time of the last poll is kept for the tab (sessionStorage),
// so a new page goes on from where the last one stopped. Each notice is
// told once a tab, in the page (aria-live) and, where the user allowed
// it, as a browser notification. Permission is asked only when the user
// clicks "allow" (a button the script adds beside a notice, or the one on
// the notices page). Without script, /notices lists them.
(function () {
  "use strict";
  var EVERY = 30000, SEEN = "strata.notices.seen", SINCE = "strata.notices.since", AT = "strata.notices.at";
  var live, timer = null, first = null;
  function get(k) { try { return window.sessionStorage.getItem(k); } catch (e) { return null; } }
  function put(k, v) { try { window.sessionStorage.setItem(k, v); } catch (e) { /* storage off: told again */ } }
  function seen() { try { return JSON.parse(get(SEEN) || "[]"); } catch (e) { return []; } }
  function can() { return "Notification" in window && window.isSecureContext; }
  // perm is the user's answer: the Permissions API's where the browser
  // has it (kept current by its change event), else Notification's.
  var perm = can() ? window.Notification.permission : "denied";
  function watchPermission(then) {
    if (!can() || !navigator.permissions || !navigator.permissions.query) { then(); return; }
    navigator.permissions.query({ name: "notifications" }).then(function (st) {
      function set() { perm = st.state === "prompt" ? "default" : st.state; then(); }
      st.addEventListener("change", set);
      set();
    }, then);
  }
  function notify(text, key) {
    if (!can() || perm !== "granted") { return; }
    try { new window.Notification("Strata", { body: text, tag: key }); } catch (e) { /* only a service worker may, here */ }
  }
  function ask(done) {
    var answered = false;
    function got(answer) {
      if (answered) { return; }
      answered = true;
      perm = answer || perm;
      done();
    }
    var p = window.Notification.requestPermission(got);
    if (p && p.then) { p.then(got); }
  }
  // offer adds the "allow" button beside the notices while the user has
  // not decided.
  function offer() {
    if (!can() || perm !== "default" || live.querySelector("button.notices-allow") || !live.querySelector(".notice")) { return; }
    var b = document.createElement("button");
    b.type = "button";
    b.className = "notices-allow";
    b.textContent = live.getAttribute("data-allow");
    b.addEventListener("click", function () { ask(function () { b.remove(); }); });
    live.appendChild(b);
  }
  function show(doc) {
    var list = doc.querySelector("[data-since]");
    if (!list) { return; }
    put(SINCE, list.getAttribute("data-since"));
    put(AT, String(Date.now()));
    var known = seen(), told = [];
    list.querySelectorAll("li[data-key]").forEach(function (li) {
      var key = li.getAttribute("data-key");
      if (known.indexOf(key) >= 0) { return; }
      known.push(key);
      var p = document.createElement("p");
      p.className = "notice";
      p.setAttribute("data-key", key);
      p.appendChild(document.importNode(li.querySelector("a") || li, true));
      live.insertBefore(p, live.querySelector("button.notices-allow"));
      told.push([li.textContent.trim(), key]);
    });
    // A few are told one by one; more at once (a new tab after a busy
    // hour) as one notification that sends the user to the page.
    if (told.length > 3) {
      notify(live.getAttribute("data-many").replace("{n}", told.length), "strata-many");
    } else {
      told.forEach(function (n) { notify(n[0], n[1]); });
    }
    put(SEEN, JSON.stringify(known.slice(-200)));
    var shown = live.querySelectorAll(".notice");
    for (var i = 0; i < shown.length - 5; i++) { shown[i].remove(); }
    offer();
  }
  function poll() {
    if (document.visibilityState !== "visible" || !window.fetch) { return; }
    var since = get(SINCE), url = live.getAttribute("data-notices");
    if (since) { url += "&since=" + encodeURIComponent(since); }
    window.fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } }).then(function (r) {
      if (!r.ok) { throw new Error("notices: " + r.status); }
      return r.text();
    }).then(function (html) {
      show(new DOMParser().parseFromString(html, "text/html"));
    }).catch(function () { /* asked again at the next turn */ });
  }
  function stop() {
    window.clearTimeout(first);
    window.clearInterval(timer);
    first = timer = null;
  }
  function start(now) {
    stop();
    var wait = now ? 0 : Math.max(0, EVERY - (Date.now() - Number(get(AT) || 0)));
    first = window.setTimeout(function () { poll(); timer = window.setInterval(poll, EVERY); }, wait);
  }
  // The notices page's own button, and what the browser says.
  function permissionPage() {
    var box = document.querySelector(".notices-permission");
    if (!box || !can()) { return; }
    var b = box.querySelector(".notices-allow"), say = box.querySelector(".notices-state");
    function state() {
      var p = perm;
      b.hidden = p !== "default";
      say.hidden = false;
      if (p === "granted") { say.textContent = box.getAttribute("data-granted"); }
      if (p === "denied") { say.textContent = box.getAttribute("data-denied"); }
    }
    b.addEventListener("click", function () { ask(state); });
    watchPermission(state);
  }
  document.addEventListener("DOMContentLoaded", function () {
    permissionPage();
    watchPermission(function () { if (live) { offer(); } });
    live = document.getElementById("notices-live");
    if (!live) { return; }
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") { start(true); } else { stop(); }
    });
    if (document.visibilityState === "visible") { start(false); }
  });
}());
