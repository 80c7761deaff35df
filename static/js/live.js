// The Live page: minute candles of the last hour (the stored bars, then the live 1-second
// bars folded in), depth and imbalance, and the scheme events of the chosen pair.
//
// One pair at a time. Every switch starts a new "session": the old EventSource is closed,
// its pending fetch aborted, and every answer and event is checked against the session it
// was for (and the pair it names), so nothing of the previous pair is ever drawn or counted.
// A refusal (the pair unsubscribed, the payment lapsed, the plan) stops the page: it says
// why and links to the fix, and asks nothing more until the customer picks a pair.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var WINDOW_MINUTES = 60;
  var MINUTE = 60000;
  var card = document.getElementById("live-card");
  var select = document.getElementById("pair-select");
  var stateEl = document.getElementById("live-state");
  var countEl = document.getElementById("live-count");
  var chart = document.getElementById("live-chart");
  var refusalEl = document.getElementById("live-refusal");
  var schemes = document.querySelector("#scheme-events tbody");
  var figures = {
    time: document.getElementById("fig-time"), close: document.getElementById("fig-close"),
    bid: document.getElementById("fig-bid"), ask: document.getElementById("fig-ask"),
    imbalance: document.getElementById("fig-imbalance"), spread: document.getElementById("fig-spread"),
  };
  var session = null;

  function utc(ms, withSeconds) {
    var text = new Date(ms).toISOString();
    return text.slice(0, 10) + " " + text.slice(11, withSeconds ? 19 : 16);
  }

  function amount(value) {
    if (value === null || value === undefined) return "–";
    return Number(value).toLocaleString("en-US", {maximumFractionDigits: 4});
  }

  function setState(text, cls) {
    stateEl.textContent = text;
    stateEl.className = "state state-" + cls;
  }

  function setCount(s) {
    countEl.dataset.pair = s.pair;
    countEl.textContent = s.bars + (s.bars === 1 ? " bar" : " bars");
  }

  function showRefusal(message, fixUrl, fixLabel) {
    refusalEl.hidden = false;
    refusalEl.querySelector("span").textContent = message;
    var link = refusalEl.querySelector("a");
    link.hidden = !fixUrl;
    if (fixUrl) { link.href = fixUrl; link.textContent = fixLabel || "Fix it"; }
  }

  function hideRefusal() {
    refusalEl.hidden = true;
  }

  // -- candles -------------------------------------------------------------------------

  function candleFromBar(pair, bar, minute) {
    var c = {pair: pair, t: minute, o: null, h: null, l: null, c: null, bid: null, ask: null, imb: null};
    foldBar(c, bar);
    return c;
  }

  function priceOf(bar) {
    if (bar.open !== undefined && bar.open !== null) return {o: bar.open, h: bar.high, l: bar.low, c: bar.close};
    if (bar.open === undefined && bar.mid_price !== undefined && bar.mid_price !== null) {
      var m = bar.mid_price;  // no trade metric subscribed: the mid is the price
      return {o: m, h: m, l: m, c: m};
    }
    return null;
  }

  // Folding is idempotent for a bar already in the candle (a resumed feed may repeat the
  // seconds the stored minute already holds): open kept, high/low extremes, close the latest.
  function foldBar(candle, bar) {
    var p = priceOf(bar);
    if (p) {
      if (candle.o === null) { candle.o = p.o; candle.h = p.h; candle.l = p.l; }
      candle.h = Math.max(candle.h, p.h);
      candle.l = Math.min(candle.l, p.l);
      candle.c = p.c;
    }
    if (bar.bid_depth !== undefined && bar.bid_depth !== null) {
      candle.bid = bar.bid_depth; candle.ask = bar.ask_depth; candle.imb = bar.imbalance;
    }
  }

  function addLiveBar(s, bar) {
    var minute = Math.floor(bar.ts_ms / MINUTE) * MINUTE;
    var last = s.candles[s.candles.length - 1];
    if (last && last.t === minute) foldBar(last, bar);
    else if (!last || minute > last.t) s.candles.push(candleFromBar(s.pair, bar, minute));
    else return;  // a second of a minute already closed and drawn from the store
    var first = minute - (WINDOW_MINUTES - 1) * MINUTE;
    while (s.candles.length && s.candles[0].t < first) s.candles.shift();
  }

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  function decimalsOf(candles) {
    var most = 0;
    candles.forEach(function (c) {
      if (c.c !== null) most = Math.max(most, (String(c.c).split(".")[1] || "").length);
    });
    return Math.min(most, 8);
  }

  function draw() {
    var s = session;
    var w = Math.max(chart.clientWidth || 600, 200), h = Math.max(chart.clientHeight || 300, 160);
    while (chart.firstChild) chart.removeChild(chart.firstChild);
    chart.setAttribute("viewBox", "0 0 " + w + " " + h);
    chart.dataset.pair = s ? s.pair : "";
    if (!s || !s.candles.length) {
      var note = el("text", {x: 12, y: 24, "class": "empty"}, chart);
      note.textContent = s && s.loaded ? "No bars in the last hour yet: waiting for the first live bar…" : "Loading…";
      return;
    }
    var right = 70, plotW = w - right - 8, bottom = 20;
    var priceTop = 8, priceH = Math.round((h - bottom) * 0.66) - priceTop;
    var depthTop = priceTop + priceH + 14, depthH = h - bottom - depthTop;
    var last = s.candles[s.candles.length - 1].t;
    var first = last - (WINDOW_MINUTES - 1) * MINUTE;
    var slot = plotW / WINDOW_MINUTES;
    function x(t) { return 8 + ((t - first) / MINUTE + 0.5) * slot; }

    var priced = s.candles.filter(function (c) { return c.o !== null; });
    var lo = Math.min.apply(null, priced.map(function (c) { return c.l; }));
    var hi = Math.max.apply(null, priced.map(function (c) { return c.h; }));
    if (!priced.length) { lo = 0; hi = 1; }
    if (hi === lo) { hi += Math.abs(hi) * 0.001 || 1; lo -= Math.abs(lo) * 0.001 || 1; }
    function y(p) { return priceTop + priceH * (hi - p) / (hi - lo); }
    var decimals = decimalsOf(priced);
    [hi, (hi + lo) / 2, lo].forEach(function (p) {
      el("line", {x1: 8, x2: 8 + plotW, y1: y(p), y2: y(p), "class": "grid"}, chart);
      var label = el("text", {x: w - right + 4, y: y(p) + 4, "class": "lbl"}, chart);
      label.textContent = p.toFixed(decimals);
    });
    var body = Math.max(1, slot * 0.7);
    priced.forEach(function (c) {
      var g = el("g", {"class": "candle " + (c.c >= c.o ? "up" : "down"), "data-pair": c.pair,
                       "data-t": c.t, "data-close": c.c}, chart);
      el("line", {x1: x(c.t), x2: x(c.t), y1: y(c.h), y2: y(c.l), "stroke-width": 1}, g);
      var top = y(Math.max(c.o, c.c));
      el("rect", {x: x(c.t) - body / 2, y: top, width: body, height: Math.max(1, y(Math.min(c.o, c.c)) - top)}, g);
    });

    // depth: bid up from the middle line, ask down; imbalance (-1..1) as a line over them
    var deep = s.candles.filter(function (c) { return c.bid !== null; });
    var mid = depthTop + depthH / 2;
    el("line", {x1: 8, x2: 8 + plotW, y1: mid, y2: mid, "class": "grid"}, chart);
    var depthLabel = el("text", {x: w - right + 4, y: depthTop + 10, "class": "lbl"}, chart);
    depthLabel.textContent = "bid depth";
    var askLabel = el("text", {x: w - right + 4, y: depthTop + depthH, "class": "lbl"}, chart);
    askLabel.textContent = "ask depth";
    if (deep.length) {
      var most = Math.max.apply(null, deep.map(function (c) { return Math.max(c.bid, c.ask); })) || 1;
      var points = [];
      deep.forEach(function (c) {
        var g = el("g", {"class": "depth", "data-pair": c.pair, "data-t": c.t}, chart);
        var up = (depthH / 2) * c.bid / most, down = (depthH / 2) * c.ask / most;
        el("rect", {"class": "bid", x: x(c.t) - body / 2, y: mid - up, width: body, height: up}, g);
        el("rect", {"class": "ask", x: x(c.t) - body / 2, y: mid, width: body, height: down}, g);
        if (c.imb !== null) points.push(x(c.t) + "," + (mid - (depthH / 2) * c.imb));
      });
      if (points.length > 1) el("polyline", {"class": "imb", points: points.join(" ")}, chart);
    }
    [first, first + 30 * MINUTE, last].forEach(function (t, i) {
      var label = el("text", {x: x(t), y: h - 5, "class": "lbl", "text-anchor": ["start", "middle", "end"][i]}, chart);
      label.textContent = i === 0 ? utc(t, false) : utc(t, false).slice(11);
    });
  }

  // A catch-up after a pause brings many bars at once: draw once per frame, not per bar.
  var drawPending = false;
  function drawSoon() {
    if (drawPending) return;
    drawPending = true;
    window.requestAnimationFrame(function () {
      drawPending = false;
      draw();
      if (session) showFigures(session);
    });
  }

  function showFigures(s) {
    var c = s.candles[s.candles.length - 1];
    var bar = s.latest || {};
    figures.time.textContent = bar.ts_ms ? utc(bar.ts_ms, true) : (c ? utc(c.t, false) : "–");
    figures.close.textContent = c && c.c !== null ? String(c.c) : "–";
    figures.bid.textContent = amount(c && c.bid);
    figures.ask.textContent = amount(c && c.ask);
    figures.imbalance.textContent = c && c.imb !== null ? Number(c.imb).toFixed(3) : "–";
    figures.spread.textContent = bar.spread_bps !== undefined && bar.spread_bps !== null
      ? Number(bar.spread_bps).toFixed(2) + " bps" : "–";
  }

  // -- scheme events -------------------------------------------------------------------

  function clearSchemes() {
    schemes.innerHTML = '<tr class="empty"><td colspan="6" class="muted">None yet on this pair.</td></tr>';
  }

  function addScheme(event) {
    var empty = schemes.querySelector(".empty");
    if (empty) empty.remove();
    var row = document.createElement("tr");
    [utc(event.ts_ms, true), event.scheme, event.direction, event.side,
     Number(event.confidence).toFixed(2), Number(event.alert_score).toFixed(0)].forEach(function (text) {
      var cell = document.createElement("td"); cell.textContent = text; row.appendChild(cell);
    });
    schemes.insertBefore(row, schemes.firstChild);
    while (schemes.children.length > 50) schemes.removeChild(schemes.lastChild);
  }

  // -- the session of one pair ---------------------------------------------------------

  function openUrl(pair, history) {
    return card.dataset.openUrl.replace("EXCHANGE/BASE/QUOTE", pair.split("/").map(encodeURIComponent).join("/"))
      + (history ? "" : "?history=0");
  }

  function end(s) {
    s.over = true;
    if (s.source) { s.source.close(); s.source = null; }
    if (s.fetching) s.fetching.abort();
    clearTimeout(s.retryTimer);
  }

  function removeOption(pair) {
    Array.prototype.slice.call(select.options).forEach(function (option) {
      if (option.value === pair) option.remove();
    });
    var gone = document.createElement("option");
    gone.value = ""; gone.disabled = true; gone.selected = true;
    gone.textContent = pair + " (no longer subscribed)";
    select.insertBefore(gone, select.firstChild);
  }

  function refused(s, error) {
    end(s);
    var details = error.details || {};
    setState(details.reason === "not_subscribed" ? "not subscribed" : "refused", "failed");
    showRefusal(error.message, details.fix_url, details.fix_label);
    if (details.reason === "not_subscribed") removeOption(s.pair);
  }

  function retryLater(s, why) {
    var wait = Math.min(30, 3 * Math.pow(2, s.failures));
    s.failures += 1;
    setState(why + ", retrying in " + wait + " s", "stale");
    s.retryTimer = setTimeout(function () { connect(s, false); }, wait * 1000);
  }

  function connect(s, history) {
    if (s.over) return;
    if (s.source) { s.source.close(); s.source = null; }
    var controller = window.AbortController ? new AbortController() : null;
    s.fetching = controller;
    fetch(openUrl(s.pair, history), {credentials: "same-origin", signal: controller && controller.signal})
      .then(function (r) {
        return r.json().catch(function () { return null; }).then(function (body) { return {status: r.status, body: body}; });
      })
      .then(function (answer) {
        if (s.over || s !== session) return;
        s.fetching = null;
        var body = answer.body || {};
        if (answer.status !== 200 || body.pair !== s.pair) { retryLater(s, "unavailable"); return; }
        if (body.refusal) { refused(s, body.refusal); return; }
        if (history) {
          s.candles = (body.bars || []).map(function (bar) {
            return candleFromBar(s.pair, bar, Math.floor(bar.ts_ms / MINUTE) * MINUTE);
          });
          s.loaded = true;
          clearSchemes();
          (body.recent_scheme_events || []).slice().reverse().forEach(addScheme);
          if (body.last_event_id && !s.lastId) s.lastId = body.last_event_id;
          draw(); showFigures(s);
        }
        listen(s, body.events_url);
      })
      .catch(function (error) {
        if (s.over || s !== session || (error && error.name === "AbortError")) return;
        retryLater(s, "unavailable");
      });
  }

  function listen(s, eventsUrl) {
    var url = eventsUrl + (s.lastId ? "&lastEventId=" + encodeURIComponent(s.lastId) : "");
    var feed = new EventSource(url);
    s.source = feed;
    function current() { return !s.over && s === session && feed === s.source; }
    feed.addEventListener("open", function () { if (current()) s.failures = 0; });
    feed.addEventListener("status", function (e) {
      if (!current()) return;
      var state = JSON.parse(e.data).state; setState(state, state.toLowerCase());
    });
    feed.addEventListener("bar", function (e) {
      if (!current()) return;
      var bar = JSON.parse(e.data);
      s.lastId = e.lastEventId;
      s.latest = bar;
      addLiveBar(s, bar);
      s.bars += 1; setCount(s);
      drawSoon();
    });
    feed.addEventListener("scheme-event", function (e) {
      if (!current()) return;
      s.lastId = e.lastEventId; addScheme(JSON.parse(e.data));
    });
    feed.addEventListener("stream-closed", function () {
      if (!current()) return;
      // Ask once why (the open call answers with the reason and its fix), or go on if
      // the stream may continue (a narrowed metric set).
      feed.close(); s.source = null;
      setState("closed", "failed");
      connect(s, false);
    });
    feed.addEventListener("error", function (e) {
      if (!current()) { feed.close(); return; }
      if (e.data) {  // the server's own `error` event (slow_consumer): resume from the last id
        feed.close(); s.source = null; connect(s, false); return;
      }
      // Refused at connect (a 4xx) or a token that expired: EventSource gives up; the open
      // call says whether it was a refusal. A dropped connection reconnects by itself.
      if (feed.readyState === EventSource.CLOSED) { feed.close(); s.source = null; retryLater(s, "disconnected"); }
    });
  }

  function start(pair) {
    if (session) end(session);
    hideRefusal();
    session = {pair: pair, candles: [], bars: 0, lastId: null, latest: null, source: null, fetching: null,
               retryTimer: null, failures: 0, over: false, loaded: false};
    setState("connecting…", "requested");
    setCount(session);
    clearSchemes();
    draw(); showFigures(session);
    connect(session, true);
  }

  select.addEventListener("change", function () { if (select.value) start(select.value); });
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(drawSoon, 100);
  });
  start(select.value);
})();
