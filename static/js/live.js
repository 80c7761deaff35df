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

  function setState(text, cls) {
    stateEl.textContent = text;
    stateEl.className = "state state-" + cls;
  }

  function draw() {
    var ctx = canvas.getContext("2d");
    var w = canvas.width, h = canvas.height, pad = 30;
    ctx.clearRect(0, 0, w, h);
    if (points.length < 2) return;
    var lo = Math.min.apply(null, points), hi = Math.max.apply(null, points);
    if (hi === lo) { hi += 1; lo -= 1; }
    ctx.strokeStyle = "#dfe3e8"; ctx.beginPath(); ctx.moveTo(pad, h - pad); ctx.lineTo(w, h - pad); ctx.stroke();
    ctx.fillStyle = "#5d6d7e"; ctx.font = "11px system-ui";
    ctx.fillText(hi.toPrecision(7), 0, 12); ctx.fillText(lo.toPrecision(7), 0, h - pad - 2);
    ctx.strokeStyle = "#1f6feb"; ctx.lineWidth = 2; ctx.beginPath();
    points.forEach(function (p, i) {
      var x = pad + (w - pad) * i / (points.length - 1);
      var y = (h - pad) - (h - pad - 10) * (p - lo) / (hi - lo);
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
    if (source) source.close();
    clearTimeout(retryTimer);
    setState("connecting…", "requested");
    fetch("/account/live/" + select.value + "/token/", {credentials: "same-origin"})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (info) {
        var url = info.events_url + (resume && lastId ? "&lastEventId=" + encodeURIComponent(lastId) : "");
        source = new EventSource(url);
        source.addEventListener("status", function (e) {
          var s = JSON.parse(e.data).state; setState(s, s.toLowerCase());
        });
        source.addEventListener("bar", function (e) {
          var bar = JSON.parse(e.data);
          lastId = e.lastEventId;
          var price = bar.close !== undefined && bar.close !== null ? bar.close : bar.mid_price;
          if (price !== null && price !== undefined) { points.push(price); if (points.length > 120) points.shift(); }
          bars += 1; countEl.textContent = bars + " bars";
          showLatest(bar); draw();
        });
        source.addEventListener("scheme-event", function (e) { lastId = e.lastEventId; addScheme(JSON.parse(e.data)); });
        source.addEventListener("stream-closed", function (e) {
          setState("closed: " + JSON.parse(e.data).reason, "failed"); source.close();
        });
        source.addEventListener("error", function () {
          if (source.readyState === EventSource.CLOSED) { retryTimer = setTimeout(function () { connect(true); }, 3000); }
        });
      })
      .catch(function () { setState("unavailable, retrying", "stale"); retryTimer = setTimeout(function () { connect(true); }, 5000); });
  }

  select.addEventListener("change", function () {
    points = []; bars = 0; lastId = null; latest.innerHTML = "";
    schemes.innerHTML = '<tr class="empty"><td colspan="6" class="muted">None yet on this pair.</td></tr>';
    connect(false);
  });
  connect(false);
})();
