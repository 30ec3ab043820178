/* Trace page: the in-page timeline, drawn with flame-chart-js (assets/vendor, global flameChartJs).

   Data arrives as <script> files written by the build (reportgen/trace/timeline.py) that call
   reportgenTimeline.add(header, payload): a page opened from file:// may insert scripts but not
   fetch local files. Each host has an index (tracks, steps, windows, level-of-detail tiles); the
   events of a time window or tile are binary columns, zlib-compressed and base64-encoded, inflated
   here with DecompressionStream. The view loads the coarsest level fine enough for its zoom and
   full-detail windows only when those visible hold few enough events, never the whole trace.

   Times: the files count integer picoseconds from the host's time origin; the chart counts
   milliseconds. The URL hash (#host=…&t0=…&t1=…&q=…&sel=…) opens a view, in ms. */
(function () {
  "use strict";

  var DETAIL_MAX_EVENTS = 250000;   // full detail when the visible windows hold at most this many events
  var PS_PER_MS = 1e9;
  var BLOCK = 16;                   // flame-chart-js block height (px); a level is BLOCK + 1 px
  var MERGED_COLOR = "#aab3bf";
  // One timeline's files, by its data folder and host: { files: key → entry, waiting: key → [resolve] }. The
  // folder tells apart two runs' hosts of one name, which a single-file report holds in one document.
  var store = {};

  function hostStore(host, base) {
    var id = base + "\n" + host;
    if (!store[id]) store[id] = { files: {}, waiting: {} };
    return store[id];
  }

  function register(base, header, payload) {
    var s = hostStore(header.host, base);
    s.files[header.key] = { header: header, payload: payload, decoded: null };
    var waiting = s.waiting[header.key] || [];
    delete s.waiting[header.key];
    waiting.forEach(function (w) { w.resolve(s.files[header.key]); });
  }

  // ---- data files ----------------------------------------------------------------------------
  window.reportgenTimeline = {
    /* Called by a data file as it runs: the <script> element that loadScript inserted names its folder. */
    add: function (header, payload) {
      var el = document.currentScript;
      register(el && el.dataset.timelineBase || "", header, payload);
    },
    instances: [],
    /* Called as soon as the parser has built a timeline's element (bootWhileParsing): its data
       starts loading before the page's charts take the main thread on DOMContentLoaded. */
    boot: function (root) {
      var wanted = parseHash().host;
      // A single-file report's timelines start when they come into view (init), not while the report is parsed.
      if (!wanted && document.querySelector("main.single-file")) return;
      if (!fc || (wanted ? wanted !== root.dataset.host : document.querySelector("[data-timeline]") !== root)) return;
      timelineOf(root).start();
    }
  };

  /* A single-file report carries its timelines' files as JSON data blocks [header, payload]. */
  function adoptEmbedded() {
    document.querySelectorAll("script[data-timeline-data]:not([data-adopted])").forEach(function (el) {
      el.dataset.adopted = "1";
      var call = JSON.parse(el.textContent);
      register(el.dataset.base || "", call[0], call[1]);
    });
  }

  function loadScript(host, base, key) {
    adoptEmbedded();
    var s = hostStore(host, base);
    if (s.files[key]) return Promise.resolve(s.files[key]);
    return new Promise(function (resolve, reject) {
      var first = !s.waiting[key];
      (s.waiting[key] = s.waiting[key] || []).push({ resolve: resolve, reject: reject });
      if (!first) return;
      var el = document.createElement("script");
      el.src = base + key + ".js";
      el.dataset.timelineBase = base;
      el.onerror = function () {
        var waiting = s.waiting[key] || [];
        delete s.waiting[key];
        waiting.forEach(function (w) { w.reject(new Error("could not load " + el.src)); });
      };
      document.head.appendChild(el);
    });
  }

  function inflate(b64) {
    var bin = atob(b64);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer();
  }

  function decodeColumns(entry) {
    if (entry.decoded) return entry.decoded;
    var h = entry.header, n = h.n, lod = h.key.charAt(0) === "l";
    entry.decoded = inflate(entry.payload).then(function (buf) {
      // The name table first: uint32 length, JSON, padding to 8 bytes; then the columns.
      var textLength = new DataView(buf).getUint32(0, true);
      var names = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, textLength)));
      var off = 4 + textLength + ((8 - (4 + textLength) % 8) % 8);
      var delta = new Float64Array(buf, off, n); off += 8 * n;
      var dur = new Float64Array(buf, off, n); off += 8 * n;
      var name = new Int32Array(buf, off, n); off += 4 * n;
      var longName = null;  // full-detail windows: XProf's long_name (a TF op's full path), -1 where none
      if (!lod) { longName = new Int32Array(buf, off, n); off += 4 * n; }
      var count = null;
      if (lod) { count = new Uint32Array(buf, off, n); off += 4 * n; }
      var track = new Uint16Array(buf, off, n); off += 2 * n;
      var level = new Uint16Array(buf, off, n);
      var start = new Float64Array(n), acc = 0;
      for (var i = 0; i < n; i++) { acc += delta[i]; start[i] = acc; }
      entry.payload = null;
      return { key: h.key, n: n, names: names, carried: h.carried || [], start: start, dur: dur,
               name: name, longName: longName, count: count, track: track, level: level };
    });
    return entry.decoded;
  }

  function decodeArgs(entry) {
    if (!entry.decoded) {
      entry.decoded = inflate(entry.payload).then(function (buf) {
        entry.payload = null;
        return JSON.parse(new TextDecoder().decode(buf));
      });
    }
    return entry.decoded;
  }

  // ---- formatting ----------------------------------------------------------------------------
  function psToUs(ps) {
    var text = (ps / 1e6).toFixed(6);
    return text.indexOf(".") >= 0 ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
  }
  function fmtDuration(ps) { return window.reportgen.fmt.durationPs(ps, 3); }  // the pages' one format (reportgen.js)
  function fmtInt(n) {  // toLocaleString is too slow for thousands of labels
    return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  var colorCache = {};
  function colorOf(name) {
    var c = colorCache[name];
    if (c) return c;
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    c = "hsl(" + ((h >>> 0) % 360) + ",55%," + (62 + ((h >>> 9) % 14)) + "%)";
    colorCache[name] = c;
    return c;
  }

  // ---- flame-chart-js plugins ----------------------------------------------------------------
  var fc = window.flameChartJs;
  // Every plugin listens on the one interactions engine: lift the EventEmitter's leak warning (at 10).
  if (fc) Object.getPrototypeOf(fc.UIPlugin).defaultMaxListeners = 0;

  /* One track: a thread, or a thread pool's threads one under the other. Levels are given (the
     build computed nesting), so the node list is handed over flat instead of as a tree; the view
     is never reset when the data changes (the page swaps data as the user zooms). */
  var TrackPlugin = fc && class extends fc.FlameChartPlugin {
    constructor(track, span) {
      super({ data: [], name: "track" });
      this.track = track;
      this.span = span;
      this.height = Math.max(1, track.levels) * (BLOCK + 1) + 2;
      this.calcMinMax();
    }
    calcMinMax() {
      if (this.span) { this.min = this.span[0]; this.max = this.span[1]; }
    }
    parseData() { this.flatTree = []; this.calcMinMax(); }
    setNodes(flat) {
      this.flatTree = flat;
      this.selectedRegion = null;
      this.hoveredRegion = null;
      if (this.renderEngine) this.initData();
    }
    handlePositionChange(delta) {
      var before = this.renderEngine.parent.positionX;
      this.interactionsEngine.setCursor("grabbing");
      this.renderEngine.tryToChangePosition(delta.deltaX);
      if (before !== this.renderEngine.parent.positionX) this.renderEngine.parent.render();
    }
    render() {
      super.render();
      var threads = this.track.threads;
      if (threads.length > 1) {  // a pool: name each thread at its first level
        for (var i = 0; i < threads.length; i++) {
          if (!threads[i].levels) continue;
          // The row above the thread's events (the build leaves it free in a pool).
          this.renderEngine.addText({ text: threads[i].name, x: 2, y: (threads[i].level - 1) * (BLOCK + 1),
                                      w: this.renderEngine.width }, 3);
        }
      }
    }
  };

  /* A process header that collapses all the process's tracks. */
  var ProcessToggle = fc && class extends fc.TogglePlugin {
    constructor(title, members) {
      super(title, { styles: { color: "rgba(89,99,110,0.28)", height: 18, font: "bold 11px sans-serif" } });
      this.members = members;
    }
    init(renderEngine, interactionsEngine) {
      this.renderEngine = renderEngine;
      this.interactionsEngine = interactionsEngine;
      var self = this;
      interactionsEngine.on("click", function (region) {
        if (!region || region.type !== "toggle" || region.data !== self.renderEngine.id) return;
        var collapse = !self.members[0].renderEngine.collapsed;
        self.members.forEach(function (p) {
          if (collapse) p.renderEngine.collapse(); else p.renderEngine.expand();
        });
        self.onToggle();
      });
    }
    getPrevEngine() { return { flexible: false }; }
  };

  // ---- the timeline of one host --------------------------------------------------------------
  function Timeline(root) {
    this.root = root;
    this.host = root.dataset.host;
    this.base = root.dataset.base;
    this.canvas = root.querySelector("canvas");
    this.scroller = root.querySelector(".timeline-scroll");
    this.status = root.querySelector("[data-timeline-status]");
    this.details = root.querySelector("[data-timeline-details]");
    this.shown = "";          // the data set on screen (file keys)
    this.selected = null;     // { key: "track:level:start", node }
    this.pendingSelect = null;
    this.ready = false;
    this.held = {};
    window.reportgenTimeline.instances.push(this);
  }

  Timeline.prototype.start = function () {
    var self = this;
    if (this.started) return this.started;
    this.say("Loading the timeline…");
    this.started = loadScript(this.host, this.base, "index").then(function (entry) {
      self.index = entry.payload;
      performance.mark("timeline-index");
      self.build();
      performance.mark("timeline-built");
      return self.update();
    }).then(function () {
      // The chart draws on the next animation frame: mark the first paint after it.
      return new Promise(function (resolve) {
        requestAnimationFrame(function () { performance.mark("timeline-raf1"); requestAnimationFrame(resolve); });
      });
    }).then(function () {
      self.ready = true;
      self.root.dataset.ready = "1";
      if (window.performance && performance.mark) performance.mark("timeline-first-paint");
    }).catch(function (err) {
      self.say("The timeline could not be loaded: " + err.message);
      console.error(err);
    });
    return this.started;
  };

  Timeline.prototype.say = function (text) { if (this.status) this.status.textContent = text; };

  Timeline.prototype.build = function () {
    var self = this, index = this.index;
    var span = [index.start / PS_PER_MS, index.end / PS_PER_MS];
    this.span = span;
    var plugins = [new fc.TimeGridPlugin()];
    // Steps: one block per step above the tracks (a mark line per step would hide the events).
    if (index.steps.length) {
      var stepsPlugin = new TrackPlugin({ levels: 1, threads: [], title: "Steps" }, span);
      stepsPlugin.setNodes(index.steps.map(function (s, i) {
        var t0 = s[1] / PS_PER_MS, t1 = s[2] / PS_PER_MS;
        return { source: { name: "Step " + s[0], start: t0, duration: t1 - t0, color: i % 2 ? "#c9d1d9" : "#afb8c1",
                           ps: s[1], dps: s[2] - s[1], count: 1, step: s[0] },
                 end: t1, parent: null, level: 0, index: i };
      }));
      stepsPlugin.on("select", function (e) { if (e.node) self.zoomToStep(e.node.source.step); });
      plugins.push(new fc.TogglePlugin("Steps  ·  " + fmtInt(index.steps.length) + " (click one to zoom to it)"),
                   stepsPlugin);
    }
    this.tracks = [];
    var byProcess = [];
    index.tracks.forEach(function (track, k) {
      var last = byProcess[byProcess.length - 1];
      if (!last || last.process !== track.process) byProcess.push(last = { process: track.process, tracks: [] });
      last.tracks.push(k);
    });
    byProcess.forEach(function (group) {
      var members = [];
      var header = new ProcessToggle(group.process, members);
      header.onToggle = function () { self.relayout(); };
      plugins.push(header);
      group.tracks.forEach(function (k) {
        var track = index.tracks[k];
        var toggle = new fc.TogglePlugin(track.title + "  ·  " + fmtInt(track.events) + " events");
        var plugin = new TrackPlugin(track, span);
        plugin.trackIndex = k;
        plugin.on("select", function (e) { self.onSelect(plugin, e.node); });
        members.push(toggle, plugin);
        plugins.push(toggle, plugin);
        self.tracks.push(plugin);
      });
    });
    this.plugins = plugins;
    this.canvas.width = this.scroller.clientWidth || 1000;
    // Never less than the plugins need: flame-chart-js loops forever when fixed-height plugins overflow.
    this.canvas.height = plugins.reduce(function (h, p) {
      return h + (p instanceof TrackPlugin || p instanceof fc.TogglePlugin ? p.height : 0);
    }, 0) +
      byProcess.length * 20 + 120;
    this.chart = new fc.FlameChartContainer({
      canvas: this.canvas,
      plugins: plugins,
      settings: { options: { tooltip: this.tooltip.bind(this), timeUnits: "ms" },
                  styles: { main: { blockHeight: BLOCK } } }
    });
    // Redraw the chosen data after any view change (wheel, drag, keys, setZoom).
    var engine = this.chart.renderEngine, render = engine.render.bind(engine);
    engine.render = function (prepare) { render(prepare); self.viewChanged(); };
    this.wireControls();
    this.relayout();
    window.addEventListener("resize", function () { self.relayout(); });
  };

  Timeline.prototype.fullHeight = function () {
    var h = 0;
    this.plugins.forEach(function (p) {
      var engine = p.renderEngine;
      if (engine && engine.collapsed) return;
      h += p.fullHeight || 0;
    });
    return Math.max(h + 4, 120);
  };

  Timeline.prototype.relayout = function () {
    var width = this.scroller.clientWidth || this.canvas.width;
    var view = this.view();
    this.chart.renderEngine.resize(width, this.fullHeight());
    this.setView(view[0], view[1]);
  };

  Timeline.prototype.view = function () {
    var e = this.chart.renderEngine;
    return [e.positionX, e.positionX + e.getRealView()];
  };

  Timeline.prototype.setView = function (t0, t1) {
    var lo = this.span[0], hi = this.span[1];
    var width = Math.max(t1 - t0, 1e-6);
    if (width > hi - lo) { t0 = lo; t1 = hi; } else {
      if (t0 < lo) { t0 = lo; t1 = lo + width; }
      if (t1 > hi) { t1 = hi; t0 = hi - width; }
    }
    this.chart.setZoom(t0, t1);
  };

  Timeline.prototype.viewChanged = function () {
    var self = this;
    clearTimeout(this.updateTimer);
    this.updateTimer = setTimeout(function () { self.update(); }, 80);
    clearTimeout(this.hashTimer);
    this.hashTimer = setTimeout(function () { self.writeHash(); }, 400);
  };

  /* The files the current view needs: full-detail windows when the visible ones hold few enough
     events (or the host has no tiles), else the coarsest tile level fine enough for one pixel. */
  Timeline.prototype.wanted = function () {
    var index = this.index, v = this.view();
    var p0 = v[0] * PS_PER_MS, p1 = v[1] * PS_PER_MS;
    var windows = index.windows.filter(function (w) { return w.end >= p0 && w.start <= p1; });
    if (!windows.length) windows = index.windows.slice(0, 1);
    var events = windows.reduce(function (a, w) { return a + w.events; }, 0);
    if (!index.lod.length || events <= DETAIL_MAX_EVENTS) {
      return { kind: "detail", keys: windows.map(function (w) { return w.key; }), events: events };
    }
    var pixel = (p1 - p0) / Math.max(this.canvas.width, 1);
    var chosen = index.lod.length - 1;
    for (var L = 0; L < index.lod.length; L++) { if (index.lod[L].resolution <= pixel) { chosen = L; break; } }
    var level = index.lod[chosen], keys = [], blocks = 0;
    var first = Math.floor((p0 - index.start) / level.tile), last = Math.floor((p1 - index.start) / level.tile);
    for (var t = Math.max(first, 0); t <= last; t++) {
      var tile = level.tiles[String(t)];
      if (tile) { keys.push(tile[0]); blocks += tile[1]; }
    }
    return { kind: "lod", level: chosen, keys: keys, events: events, blocks: blocks, resolution: level.resolution };
  };

  Timeline.prototype.update = function () {
    var self = this;
    var want = this.wanted();
    var id = want.keys.join(",");
    if (id === this.shown || id === this.loading) return Promise.resolve();
    this.loading = id;
    if (want.keys.length > 1 || !hostStore(this.host, this.base).files[want.keys[0]]) {
      this.say("Loading " + want.keys.length + " file" + (want.keys.length === 1 ? "" : "s") + "…");
    }
    return Promise.all(want.keys.map(function (key) {
      return loadScript(self.host, self.base, key).then(decodeColumns);
    })).then(function (sets) {
      performance.mark("timeline-data");
      if (self.loading !== id) return;
      self.loading = null;
      self.show(sets, want);
      performance.mark("timeline-shown");
      self.shown = id;
      self.forget(want.keys);
    });
  };

  /* Hand the decoded sets to the tracks. An event that several loaded files hold (a window's
     events still running from an earlier window, a long event in several tiles) is drawn once,
     from the file where it starts. */
  Timeline.prototype.show = function (sets, want) {
    var index = this.index, lod = want.kind === "lod";
    var perTrack = this.tracks.map(function () { return []; });
    var loaded = {};
    sets.forEach(function (set) { loaded[set.key] = true; });
    var level = lod ? index.lod[want.level] : null;
    var windowKeys = index.windows.map(function (w) { return w.key; });
    var windowStarts = index.windows.map(function (w) { return w.start; });
    var owner = function (ps) {
      if (lod) {
        var t = Math.floor((ps - index.start) / level.tile), tile = level.tiles[String(t)];
        return tile ? tile[0] : null;
      }
      var lo = 0, hi = windowStarts.length - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (windowStarts[mid] <= ps) lo = mid; else hi = mid - 1; }
      return windowKeys[lo];
    };
    var drawn = 0;
    sets.forEach(function (set) {
      var skip = {};
      if (!lod) set.carried.forEach(function (i) { if (loaded[owner(set.start[i])]) skip[i] = true; });
      for (var i = 0; i < set.n; i++) {
        if (skip[i]) continue;
        if (lod && set.count[i] === 1 && loaded[owner(set.start[i])] && owner(set.start[i]) !== set.key) continue;
        var merged = lod && set.count[i] > 1;
        var name = set.name[i] >= 0 ? set.names[set.name[i]] : "";
        var startMs = set.start[i] / PS_PER_MS, durMs = set.dur[i] / PS_PER_MS;
        var source = {
          name: merged ? fmtInt(set.count[i]) + " events" : name,
          start: startMs, duration: durMs,
          color: merged ? MERGED_COLOR : colorOf(name),
          ps: set.start[i], dps: set.dur[i], file: set.key, row: i,
          count: lod ? set.count[i] : 1, lod: lod
        };
        perTrack[set.track[i]].push({ source: source, end: startMs + durMs, parent: null, level: set.level[i], index: 0 });
        drawn++;
      }
    });
    var several = sets.length > 1;
    perTrack.forEach(function (flat, k) {
      if (several) flat.sort(function (a, b) { return a.level - b.level || a.source.start - b.source.start; });
      for (var i = 0; i < flat.length; i++) flat[i].index = i;
      this.tracks[k].setNodes(flat);
    }, this);
    this.drawn = drawn;
    this.mode = want;
    this.reselect();
    this.chart.render();
    var where = lod
      ? "Overview level " + want.level + ": events shorter than " + fmtDuration(want.resolution) +
        " that follow each other are merged (grey); zoom in for every event."
      : "Every event of the visible window" + (want.keys.length === 1 ? "" : "s") + ".";
    var excerpt = "";
    if (index.whole) {  // a single-file report's excerpt
      excerpt = index.windows.length
        ? "This single-file report holds " + (index.excerpt.step !== null ? "step " + index.excerpt.step + ", " : "") +
          fmtInt(index.windows[0].events) + " of the trace's " + fmtInt(index.whole.events) + " events; the site holds them all. "
        : "The events of this trace did not fit in this single-file report; the site holds them all. ";
    }
    this.shownStatus = excerpt + fmtInt(index.events) + " events in " + fmtInt(index.tracks.length) +
      " tracks; drawn now: " + fmtInt(drawn) + (lod ? " blocks" : " events") + ". " + where;
    this.say(this.shownStatus);
    this.root.dataset.mode = want.kind;
    this.root.dataset.drawn = String(drawn);
  };

  /* Memory stays bounded while the user roams (or a search reads window after window): files not
     used by the last few views are dropped, and loaded again if needed. */
  var KEEP_FILES = 24;
  Timeline.prototype.forget = function (keys) {
    var files = hostStore(this.host, this.base).files, used = this.used || (this.used = {});
    this.tick = (this.tick || 0) + 1;
    var tick = this.tick;
    keys.forEach(function (k) { used[k] = tick; });
    var loaded = Object.keys(files).filter(function (k) { return k !== "index" && files[k].decoded; });
    if (loaded.length <= KEEP_FILES) return;
    loaded.sort(function (a, b) { return (used[a] || 0) - (used[b] || 0); });
    loaded.slice(0, loaded.length - KEEP_FILES).forEach(function (k) {
      if (keys.indexOf(k) < 0 && !(this.selected && this.selected.node.source.file === k)) delete files[k];
    }, this);
  };

  // ---- selection and details -----------------------------------------------------------------
  function eventKey(trackIndex, node) { return trackIndex + ":" + node.level + ":" + node.source.ps; }

  Timeline.prototype.onSelect = function (plugin, node) {
    if (!node) return;
    this.tracks.forEach(function (p) { if (p !== plugin && p.selectedRegion) { p.selectedRegion = null; } });
    if (node.source.count > 1) {
      this.selected = null;
      this.showMerged(plugin, node);
      return;
    }
    this.selected = { key: eventKey(plugin.trackIndex, node), plugin: plugin, node: node };
    this.showDetails(plugin, node);
    this.writeHash();
  };

  Timeline.prototype.select = function (plugin, node) {
    this.tracks.forEach(function (p) { p.selectedRegion = null; });
    plugin.selectedRegion = { data: node, type: "node" };
    this.onSelect(plugin, node);
    this.chart.render();
    var top = plugin.renderEngine.position + node.level * (BLOCK + 1);
    if (top < this.scroller.scrollTop || top > this.scroller.scrollTop + this.scroller.clientHeight - 40) {
      this.scroller.scrollTop = Math.max(0, top - 60);
    }
  };

  Timeline.prototype.reselect = function () {
    var want = this.pendingSelect || (this.selected && this.selected.key);
    if (!want) return;
    var parts = want.split(":"), k = +parts[0], level = +parts[1], ps = +parts[2];
    var plugin = this.tracks[k];
    if (!plugin) return;
    var flat = plugin.flatTree;
    for (var i = 0; i < flat.length; i++) {
      var n = flat[i];
      if (n.level === level && n.source.ps === ps && n.source.count === 1) {
        this.pendingSelect = null;
        plugin.selectedRegion = { data: n, type: "node" };
        this.selected = { key: want, plugin: plugin, node: n };
        if (!this.detailsShownFor || this.detailsShownFor !== want || n.source.lod !== this.detailsLod) {
          this.showDetails(plugin, n);
        }
        return;
      }
    }
  };

  function row(dl, label, value, cls) {
    var dt = document.createElement("dt");
    dt.textContent = label;
    var dd = document.createElement("dd");
    dd.textContent = value;
    if (cls) dd.className = cls;
    dl.appendChild(dt);
    dl.appendChild(dd);
    return dd;
  }

  Timeline.prototype.showDetails = function (plugin, node) {
    var self = this, src = node.source, track = plugin.track;
    var panel = this.details;
    panel.hidden = false;
    panel.innerHTML = "";
    var h = document.createElement("h4");
    h.textContent = src.name;
    panel.appendChild(h);
    var dl = document.createElement("dl");
    panel.appendChild(dl);
    var thread = track.threads.filter(function (t) { return node.level >= t.level && node.level < t.level + t.levels; })[0];
    row(dl, "Process", track.process);
    row(dl, "Thread", thread ? thread.name : track.title);
    row(dl, "Start", psToUs(src.ps) + " µs", "num").dataset.field = "start_us";
    row(dl, "Duration", psToUs(src.dps) + " µs (" + fmtDuration(src.dps) + ")", "num").dataset.field = "dur_us";
    row(dl, "End", psToUs(src.ps + src.dps) + " µs", "num");
    row(dl, "Nesting level", String(node.level - (thread ? thread.level : 0)));
    this.detailsShownFor = eventKey(plugin.trackIndex, node);
    this.detailsLod = src.lod;
    var buttons = document.createElement("p");
    var focus = document.createElement("button");
    focus.type = "button";
    focus.textContent = "Zoom to this event (F)";
    focus.addEventListener("click", function () { self.focusSelected(); });
    buttons.appendChild(focus);
    panel.appendChild(buttons);
    var args = document.createElement("div");
    args.dataset.timelineArgs = "";
    panel.appendChild(args);
    this.root.dataset.selected = this.detailsShownFor;
    if (src.lod) {
      args.textContent = "Zoom in to see this event's arguments.";
      return;
    }
    var windowIndex = this.index.windows.map(function (w) { return w.key; }).indexOf(src.file);
    var argsKey = this.index.windows[windowIndex].args;
    args.textContent = "Loading arguments…";
    loadScript(this.host, this.base, argsKey).then(decodeArgs).then(function (objects) {
      if (self.detailsShownFor !== eventKey(plugin.trackIndex, node)) return;
      var obj = objects[src.row] || {};
      args.innerHTML = "";
      var table = document.createElement("table");
      table.className = "timeline-args";
      var body = document.createElement("tbody");
      table.appendChild(body);
      function add(k, v) {
        var tr = document.createElement("tr");
        var th = document.createElement("th");
        th.textContent = k;
        var td = document.createElement("td");
        td.textContent = typeof v === "string" ? v : JSON.stringify(v);
        tr.appendChild(th);
        tr.appendChild(td);
        body.appendChild(tr);
      }
      ["pid", "tid", "ph", "cat", "bind_id", "id", "flow_in", "flow_out"].forEach(function (k) {
        if (obj[k] !== undefined) add(k, obj[k]);
      });
      var a = obj.args || {};
      Object.keys(a).forEach(function (k) { add("args." + k, a[k]); });
      args.appendChild(table);
      args.dataset.event = JSON.stringify(obj);
      self.root.dataset.argsReady = self.detailsShownFor;
    }).catch(function (err) { args.textContent = "Arguments could not be loaded: " + err.message; });
  };

  Timeline.prototype.showMerged = function (plugin, node) {
    var self = this, src = node.source, panel = this.details;
    panel.hidden = false;
    panel.innerHTML = "";
    var p = document.createElement("p");
    p.textContent = fmtInt(src.count) + " events of " + plugin.track.title + " merged between " +
      psToUs(src.ps) + " and " + psToUs(src.ps + src.dps) + " µs (each shorter than one pixel at this zoom).";
    panel.appendChild(p);
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = "Zoom in";
    b.addEventListener("click", function () {
      var pad = src.duration * 0.1;
      self.setView(src.start - pad, src.start + src.duration + pad);
    });
    panel.appendChild(b);
  };

  Timeline.prototype.focusSelected = function () {
    if (!this.selected) return;
    var s = this.selected.node.source, pad = Math.max(s.duration * 0.25, 1e-6);
    this.setView(s.start - pad, s.start + s.duration + pad);
  };

  Timeline.prototype.tooltip = function (data, engine, mouse) {
    if (!data || !mouse) return;
    var s = data.data.source, fields;
    if (s.count > 1) {
      fields = [{ text: s.name + " merged" }, { text: "from " + s.start.toFixed(3) + " ms, over " + fmtDuration(s.dps) },
                { text: "click, then Zoom in (or W) to see them" }];
    } else {
      fields = [{ text: s.name }, { text: "duration " + fmtDuration(s.dps) }, { text: "start " + s.start.toFixed(6) + " ms" }];
    }
    engine.renderTooltipFromData(fields, mouse);
  };

  // ---- steps, search, keys, hash -------------------------------------------------------------
  /* `number` may be a step's name as other pages show it ("train 36"): its last number counts. */
  Timeline.prototype.zoomToStep = function (number) {
    var digits = String(number).match(/(-?\d+)\s*$/);
    var wanted = digits ? Number(digits[1]) : NaN;
    var step = this.index.steps.filter(function (s) { return s[0] === wanted; })[0];
    if (!step) { this.say("This trace marks no step " + number + "."); return false; }
    var t0 = step[1] / PS_PER_MS, t1 = step[2] / PS_PER_MS, pad = (t1 - t0) * 0.02;
    this.setView(t0 - pad, t1 + pad);
    var select = this.root.querySelector("[data-timeline-step]");
    if (select) select.value = String(step[0]);
    return true;
  };

  /* The next event (after the selection, else after the view's start) whose name or long name
     contains `text` (is `text`, when exact), within [from, to] ms when given: windows are read one
     at a time, in time order. */
  Timeline.prototype.find = function (text, from, to, exact) {
    var self = this, index = this.index, needle = text.toLowerCase();
    var afterPs = this.selected ? this.selected.node.source.ps : (from !== undefined ? from : this.view()[0]) * PS_PER_MS - 1;
    var untilPs = to !== undefined ? to * PS_PER_MS : Infinity;
    var candidates = index.windows.filter(function (w) { return w.end > afterPs && w.start <= untilPs; });
    var i = 0;
    function next() {
      if (i >= candidates.length) return Promise.resolve(null);
      var w = candidates[i++];
      return loadScript(self.host, self.base, w.key).then(decodeColumns).then(function (set) {
        self.forget([w.key]);
        var matches = set.names.map(function (n) { return exact ? n === text : n.toLowerCase().indexOf(needle) >= 0; });
        var best = -1;
        for (var r = 0; r < set.n; r++) {
          if (!(set.name[r] >= 0 && matches[set.name[r]]) && !(set.longName[r] >= 0 && matches[set.longName[r]])) continue;
          var s = set.start[r];
          if (s <= afterPs || s > untilPs) continue;
          if (best < 0 || s < set.start[best]) best = r;
        }
        if (best < 0) return next();
        return { set: set, row: best };
      });
    }
    return next().then(function (hit) {
      if (!hit) return null;
      var set = hit.set, r = hit.row;
      return { key: set.track[r] + ":" + set.level[r] + ":" + set.start[r], start: set.start[r], dur: set.dur[r] };
    });
  };

  Timeline.prototype.goTo = function (hit, keepView) {
    this.pendingSelect = hit.key;
    this.selected = null;
    if (!keepView) {
      var t0 = hit.start / PS_PER_MS, d = Math.max(hit.dur / PS_PER_MS, 1e-6), pad = Math.max(d * 2, 0.01);
      this.setView(t0 - pad, t0 + d + pad);
    }
    var self = this;
    return this.update().then(function () {
      self.reselect();
      if (self.selected) self.select(self.selected.plugin, self.selected.node);
      if (self.shownStatus) self.say(self.shownStatus);
    });
  };

  Timeline.prototype.search = function (text) {
    var self = this;
    if (!text) return Promise.resolve();
    this.say("Searching for “" + text + "”…");
    return this.find(text).then(function (hit) {
      if (!hit) {
        self.selected = null;
        return self.find(text, self.span[0]).then(function (again) {
          if (!again) { self.say("No event named like “" + text + "”."); return; }
          return self.goTo(again);
        });
      }
      return self.goTo(hit);
    });
  };

  Timeline.prototype.wireControls = function () {
    var self = this, root = this.root;
    var search = root.querySelector("[data-timeline-search]");
    if (search) {
      search.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); self.search(search.value.trim()); }
      });
    }
    var step = root.querySelector("[data-timeline-step]");
    if (step) {
      this.index.steps.forEach(function (s) {
        var o = document.createElement("option");
        o.value = String(s[0]);
        o.textContent = "Step " + s[0] + " (" + fmtDuration(s[2] - s[1]) + ")";
        step.appendChild(o);
      });
      (step.closest("label") || step).hidden = !this.index.steps.length;
      step.addEventListener("change", function () { if (step.value !== "") self.zoomToStep(step.value); });
    }
    var reset = root.querySelector("[data-timeline-reset]");
    if (reset) reset.addEventListener("click", function () { self.setView(self.span[0], self.span[1]); });
    // Wheel scrolls the tracks; with Ctrl (or Alt) it zooms, as in Perfetto.
    this.scroller.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.altKey && !e.metaKey && Math.abs(e.deltaY) >= Math.abs(e.deltaX)) e.stopPropagation();
    }, true);
    document.addEventListener("keydown", function (e) { self.onKey(e, true); });
    document.addEventListener("keyup", function (e) { self.onKey(e, false); });
  };

  Timeline.prototype.active = function () {
    return this.ready && this.root.offsetParent !== null;
  };

  /* W/S zoom in/out around the view's centre, A/D pan, F focuses the selection, while held. */
  Timeline.prototype.onKey = function (e, down) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    if (e.ctrlKey || e.metaKey || e.altKey || !this.active()) return;
    var key = (e.key || "").toLowerCase();
    if (down && key === "f") { this.focusSelected(); return; }
    if ("wasd".indexOf(key) < 0 || key.length !== 1) return;
    e.preventDefault();
    if (!down) { delete this.held[key]; return; }
    if (this.held[key]) return;
    this.held[key] = true;
    var self = this, last = performance.now();
    if (this.keyLoop) return;
    function tick(now) {
      var dt = Math.min(now - last, 50);
      last = now;
      var keys = Object.keys(self.held);
      if (!keys.length) { self.keyLoop = null; return; }
      var v = self.view(), width = v[1] - v[0], mid = (v[0] + v[1]) / 2;
      var zoom = Math.exp(dt / 250), pan = width * dt / 500;
      if (self.held.w) width /= zoom;
      if (self.held.s) width *= zoom;
      if (self.held.a) mid -= pan;
      if (self.held.d) mid += pan;
      self.setView(mid - width / 2, mid + width / 2);
      self.keyLoop = requestAnimationFrame(tick);
    }
    this.keyLoop = requestAnimationFrame(tick);
  };

  Timeline.prototype.writeHash = function () {
    if (!this.ready || !this.active() || !window.history || !history.replaceState) return;
    var v = this.view(), parts = ["host=" + encodeURIComponent(this.host), "t0=" + v[0].toFixed(6), "t1=" + v[1].toFixed(6)];
    if (this.selected) parts.push("sel=" + this.selected.key);
    history.replaceState(null, "", "#" + parts.join("&"));
  };

  function parseHash() {
    var out = {};
    var hash = (window.location.hash || "").replace(/^#/, "");
    hash.split("&").forEach(function (part) {
      var eq = part.indexOf("=");
      if (eq > 0) out[decodeURIComponent(part.slice(0, eq))] = decodeURIComponent(part.slice(eq + 1).replace(/\+/g, " "));
    });
    return out;
  }

  /* Open the view a link asks for: a time range (ms), a step, an event by key, or the first event
     named like `q` in the range. */
  Timeline.prototype.openLink = function (params) {
    var self = this;
    this.selected = null;  // a link's search starts at its range, not after the current selection
    var t0 = parseFloat(params.t0), t1 = parseFloat(params.t1);
    if (params.step !== undefined) this.zoomToStep(params.step);
    if (isFinite(t0) && isFinite(t1) && t1 > t0) this.setView(t0, t1);
    var done;
    if (params.sel) {
      this.pendingSelect = params.sel;
      done = this.update().then(function () {
        self.reselect();
        if (self.selected) self.select(self.selected.plugin, self.selected.node);
      });
    } else if (params.q) {
      // A link names an event exactly (an op, a kernel): an exact name first, else one that contains it.
      var v = this.view();
      done = this.find(params.q, v[0], v[1], true).then(function (hit) {
        return hit || self.find(params.q, v[0], v[1], false);
      }).then(function (hit) {
        if (hit) return self.goTo(hit, isFinite(t0) && isFinite(t1));
        self.say("No event named like “" + params.q + "” in this range.");
      });
    } else {
      done = this.update();
    }
    return done.then(function () { self.root.dataset.linked = "1"; });
  };

  function timelineOf(root) {
    if (!root.timeline) root.timeline = new Timeline(root);
    return root.timeline;
  }

  function init() {
    if (!fc) return;
    var roots = document.querySelectorAll("[data-timeline]");
    if (!roots.length) return;
    var params = parseHash();
    var timelines = Array.prototype.map.call(roots, timelineOf);
    var select = document.querySelector("select[data-host-select='trace']");
    if (params.host && select && select.value !== params.host) {
      select.value = params.host;
      select.dispatchEvent(new Event("change"));
    }
    // A single-file report holds every run's timeline: each starts when it comes near the screen, not all of
    // them before the report can be read (they took a second of its opening).
    var lazy = document.querySelector("main.single-file") !== null && "IntersectionObserver" in window;
    timelines.forEach(function (tl) {
      function maybeStart() {
        // Asked after the observer (a hidden timeline never comes into view): offsetParent lays the page out.
        if (lazy && !tl.seen && !params.host) {
          var seen = new IntersectionObserver(function (entries) {
            if (!entries.some(function (e) { return e.isIntersecting; })) return;
            seen.disconnect();
            tl.seen = true;
            maybeStart();
          }, { rootMargin: "400px 0px" });
          seen.observe(tl.root);
          return;
        }
        if (tl.root.offsetParent === null) return;
        tl.start().then(function () {
          if (params.host === tl.host || (!params.host && (params.t0 || params.q || params.step || params.sel))) {
            params.host = tl.host;
            return tl.openLink(params);
          }
        });
      }
      if (select) select.addEventListener("change", function () { setTimeout(maybeStart, 0); });
      maybeStart();
    });
    // A single-file report's links to a view carry it in data-view (their href is the page's section).
    var linkedSection = null;
    document.addEventListener("click", function (e) {
      var a = e.target.closest && e.target.closest("a[data-view]");
      if (!a) return;
      e.preventDefault();
      linkedSection = document.getElementById((a.getAttribute("href") || "").slice(1));
      window.location.hash = a.dataset.view;
    });
    // A link within the same document (a single-file report, or an edited address) opens its view.
    window.addEventListener("hashchange", function () {
      var p = parseHash();
      if (!p.host && !p.t0 && !p.q && !p.step && !p.sel) return;
      if (p.host && select && select.value !== p.host) {
        select.value = p.host;
        select.dispatchEvent(new Event("change"));
      }
      var tl = timelines.filter(function (t) {
        if (linkedSection && !linkedSection.contains(t.root)) return false;
        return p.host ? t.host === p.host : t.root.offsetParent !== null;
      })[0];
      linkedSection = null;
      if (!tl) return;
      tl.root.scrollIntoView();
      tl.start().then(function () { return tl.openLink(p); });
    });
  }

  /* Pages carry no inline code: the first timeline is noticed while the page is parsed. */
  function bootWhileParsing() {
    if (document.readyState !== "loading" || !window.MutationObserver) return;
    var observer = new MutationObserver(function () {
      var root = document.querySelector("[data-timeline]");
      if (!root || !root.querySelector("[data-timeline-details]")) return;  // its last child: all of it is there
      observer.disconnect();
      window.reportgenTimeline.boot(root);
    });
    observer.observe(document.documentElement, { childList: true, subtree: true });
    document.addEventListener("DOMContentLoaded", function () { observer.disconnect(); });
  }

  bootWhileParsing();
  document.addEventListener("DOMContentLoaded", init);
})();
