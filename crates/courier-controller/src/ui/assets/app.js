// Courier's web view: keeps the live part of the page (#live) up to date without a reload, by
// fetching the same URL every few seconds with `X-Courier-Fragment: live` (the server answers only
// that part). Focus stays where it was: the focused link is found again by its data-key or href.
// Without JavaScript the pages still work; they are just not live.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!live) {
    return;
  }
  var PERIOD = 2000;
  var MAX_PERIOD = 30000;
  var delay = PERIOD;
  var last = null;

  function say(text, problem) {
    if (!status) {
      return;
    }
    status.textContent = text;
    status.classList.toggle("problem", !!problem);
  }

  function keyOf(el) {
    if (!el || !live.contains(el)) {
      return null;
    }
    return el.getAttribute("data-key") || el.getAttribute("href");
  }

  function swap(html) {
    var focused = keyOf(document.activeElement);
    live.innerHTML = html;
    if (focused) {
      var links = live.querySelectorAll("[data-key], a[href]");
      for (var i = 0; i < links.length; i++) {
        if (keyOf(links[i]) === focused) {
          links[i].focus();
          break;
        }
      }
    }
  }

  function clock() {
    var d = new Date();
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  function tick() {
    if (document.hidden) {
      setTimeout(tick, PERIOD);
      return;
    }
    fetch(location.pathname + location.search, {
      headers: { "X-Courier-Fragment": "live" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (r) {
      if (r.status === 401) {
        location.reload();
        throw new Error("signed out");
      }
      return r.text().then(function (text) {
        if (!r.ok) {
          throw new Error(text || ("HTTP " + r.status));
        }
        return text;
      });
    }).then(function (html) {
      if (html !== last) {
        last = html;
        swap(html);
      }
      delay = PERIOD;
      say("Live · updated " + clock(), false);
    }).catch(function (e) {
      delay = Math.min(delay * 2, MAX_PERIOD);
      say("Not updating (" + e.message + "); retrying", true);
    }).then(function () {
      setTimeout(tick, delay);
    });
  }

  say("Live", false);
  setTimeout(tick, PERIOD);
})();
