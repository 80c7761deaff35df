// The Live page: one EventSource per selected pair, a small price chart, the latest bar
// and the scheme events. Reconnects with a fresh token, resuming from the last event id.
(function () {
  "use strict";
  var select = document.getElementById("pair-select");
  var stateEl = document.getElementById("live-state");
  var countEl = document.getElementById("live-count");
  var canvas = document.getElementById("live-chart");
  var latest = document.querySelector("#live-latest tbody");
  var schemes = document.querySelector("#scheme-events tbody");
  var source = null, points = [], bars = 0, lastId = null, retryTimer = null;
  var generation = 0;  // bumped by every connect: answers and events of an older one are ignored

  function setState(text, cls) {
    stateEl.textContent = text;
    stateEl.className = "state state-" + cls;
  }

  function draw() {
    var ctx = canvas.getContext("2d");
    var w = canvas.width, h = canvas.height, pad = 30, left = 70;
    ctx.clearRect(0, 0, w, h);
    if (points.length < 2) return;
    var prices = points.map(function (q) { return q.p; });
    var lo = Math.min.apply(null, prices), hi = Math.max.apply(null, prices);
    if (hi === lo) { hi += 1; lo -= 1; }
    var t0 = points[0].t, t1 = points[points.length - 1].t;
    ctx.strokeStyle = "#dfe3e8"; ctx.beginPath(); ctx.moveTo(left, h - pad); ctx.lineTo(w, h - pad); ctx.stroke();
    ctx.fillStyle = "#5d6d7e"; ctx.font = "11px system-ui";
    // prices as the server sent them (at the instrument's precision), times in UTC
    ctx.fillText(String(hi), 0, 12); ctx.fillText(String(lo), 0, h - pad - 2);
    [t0, (t0 + t1) / 2, t1].forEach(function (t, i) {
      var label = new Date(t).toISOString().slice(11, 19);
      var x = left + (w - left) * i / 2 - (i === 2 ? 48 : i === 1 ? 24 : 0);
      ctx.fillText(label, x, h - pad + 14);
    });
    ctx.fillText("UTC", w - 24, h - 2);
    ctx.strokeStyle = "#1f6feb"; ctx.lineWidth = 2; ctx.beginPath();
    points.forEach(function (q, i) {
      var x = left + (w - left) * (t1 > t0 ? (q.t - t0) / (t1 - t0) : i / (points.length - 1));
      var y = (h - pad) - (h - pad - 10) * (q.p - lo) / (hi - lo);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }

  function showLatest(bar) {
    latest.innerHTML = "";
    Object.keys(bar).forEach(function (key) {
      var row = document.createElement("tr");
      var name = document.createElement("th"); name.textContent = key;
      var value = document.createElement("td");
      var v = bar[key];
      value.textContent = v === null ? "–" : (key === "ts_ms" ? new Date(v).toISOString() : String(v));
      row.appendChild(name); row.appendChild(value); latest.appendChild(row);
    });
  }

  function addScheme(event) {
    var empty = schemes.querySelector(".empty");
    if (empty) empty.remove();
    var row = document.createElement("tr");
    [new Date(event.ts_ms).toISOString().slice(11, 19), event.scheme, event.direction, event.side,
     Number(event.confidence).toFixed(2), Number(event.alert_score).toFixed(0)].forEach(function (text) {
      var cell = document.createElement("td"); cell.textContent = text; row.appendChild(cell);
    });
    schemes.insertBefore(row, schemes.firstChild);
    while (schemes.children.length > 50) schemes.removeChild(schemes.lastChild);
  }

  function connect(resume) {
    var mine = ++generation;
    if (source) { source.close(); source = null; }  // before asking for the new token
    clearTimeout(retryTimer);
    setState("connecting…", "requested");
    fetch("/account/live/" + select.value + "/token/", {credentials: "same-origin"})
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) { return {ok: r.ok, status: r.status, body: body}; });
      })
      .then(function (answer) {
        if (mine !== generation) return;  // the pair changed meanwhile
        if (!answer.ok) {
          var error = answer.body && answer.body.error;
          if (error && (answer.status === 402 || answer.status === 403)) {
            setState(error.message, "failed");  // the plan or the payment refuses: retrying will not help
            return;
          }
          throw new Error(answer.status);
        }
        var info = answer.body;
        if (!resume) (info.recent_scheme_events || []).slice().reverse().forEach(addScheme);
        var url = info.events_url + (resume && lastId ? "&lastEventId=" + encodeURIComponent(lastId) : "");
        var feed = new EventSource(url);
        source = feed;
        function current() { return feed === source && mine === generation; }
        feed.addEventListener("status", function (e) {
          if (!current()) return;
          var s = JSON.parse(e.data).state; setState(s, s.toLowerCase());
        });
        feed.addEventListener("bar", function (e) {
          if (!current()) return;
          var bar = JSON.parse(e.data);
          lastId = e.lastEventId;
          var price = bar.close !== undefined && bar.close !== null ? bar.close : bar.mid_price;
          if (price !== null && price !== undefined) { points.push({t: bar.ts_ms, p: price}); if (points.length > 120) points.shift(); }
          bars += 1; countEl.textContent = bars + " bars";
          showLatest(bar); draw();
        });
        feed.addEventListener("scheme-event", function (e) {
          if (!current()) return;
          lastId = e.lastEventId; addScheme(JSON.parse(e.data));
        });
        feed.addEventListener("stream-closed", function (e) {
          if (!current()) return;
          setState("closed: " + JSON.parse(e.data).reason, "failed"); feed.close();
        });
        feed.addEventListener("error", function () {
          if (!current()) { feed.close(); return; }
          if (feed.readyState === EventSource.CLOSED) { retryTimer = setTimeout(function () { connect(true); }, 3000); }
        });
      })
      .catch(function () {
        if (mine !== generation) return;
        setState("unavailable, retrying", "stale"); retryTimer = setTimeout(function () { connect(true); }, 5000);
      });
  }

  select.addEventListener("change", function () {
    points = []; bars = 0; lastId = null; latest.innerHTML = "";
    schemes.innerHTML = '<tr class="empty"><td colspan="6" class="muted">None yet on this pair.</td></tr>';
    connect(false);
  });
  connect(false);
})();
