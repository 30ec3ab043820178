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

  // Full detail when the view holds at most this many events per pixel of its width (an index of format 2 counts
  // them; format 1: when the visible windows hold at most DETAIL_MAX_EVENTS). Past it, tiles of merged blocks.
  var DETAIL_EVENTS_PER_PX = 8;
  // Files of at most this many rows in all are handed to the tracks whole (a small host draws fast enough so); past
  // it, the tracks get the slice of the view and half a view each side.
  var SLICE_MIN_ROWS = 25000;
  var DETAIL_MAX_EVENTS = 250000;
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

  /* A counter track's file: float64 time deltas (ps), then float64 values. */
  function decodeCounter(entry) {
    if (!entry.decoded) {
      var n = entry.header.n;
      entry.decoded = inflate(entry.payload).then(function (buf) {
        var delta = new Float64Array(buf, 0, n), value = new Float64Array(buf, 8 * n, n), time = new Float64Array(n), acc = 0;
        for (var i = 0; i < n; i++) { acc += delta[i]; time[i] = acc; }
        entry.payload = null;
        return { time: time, value: value };
      });
    }
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
  /* A time `ps` from the ruler's origin, signed, to a resolution of about `resolutionPs` (never finer than 1 ns):
     enough digits to tell the event from its neighbours, no more. */
  function fmtSigned(ps, resolutionPs) {
    var a = Math.abs(ps), unit = a >= 1e12 ? 1e12 : a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : 1e3;
    var digits = Math.min(6, Math.max(0, Math.ceil(Math.log10(unit / Math.max(resolutionPs, 1e3)) - 1e-9)));
    return (ps < 0 ? "−" : "+") + window.reportgen.fmt.durationPs(a, digits);
  }
  function fmtCounter(value, unit) {
    return unit === "bytes" ? window.reportgen.fmt.bytes(value) : window.reportgen.fmt.num(value, 2);
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
      // A track outside the scrolled-to part of the canvas (and a screen around it) is not drawn: most of a
      // device's tracks are off screen, and drawing them cost most of each frame. Scrolling draws again.
      if (this.onScreen && !this.onScreen(this)) return true;
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
    this.canvas = root.querySelector("[data-timeline-canvas]") || root.querySelector(".timeline-scroll canvas");
    this.scroller = root.querySelector(".timeline-scroll");
    this.ruler = root.querySelector("[data-timeline-ruler]");
    this.overlay = root.querySelector("[data-timeline-overlay]");
    this.marks = [];          // marked times (ms), in the order they were set: the last two are measured
    this.pinned = [];         // track indices pinned to the top, in pin order
    this.hidden = [];         // process ordinals (in the index's order) not drawn
    this.origin = null;       // the step whose start the ruler counts from, else the capture's start
    this.status = root.querySelector("[data-timeline-status]");
    this.details = root.querySelector("[data-timeline-details]");
    this.shown = "";          // the data set on screen (file keys)
    this.selected = null;     // { key: "track:level:start", node }
    this.pendingSelect = null;
    this.ready = false;
    this.held = {};
    // One host's timeline among every host's (the trace page's "All hosts"): its times plus offsetMs are the
    // shared axis's; the one the user last touched leads, and the others follow its view.
    this.groupName = root.dataset.group || null;
    this.offsetMs = (+root.dataset.offsetPs || 0) / PS_PER_MS;
    if (this.groupName) {
      var group = groupOf(this.groupName);
      group.members.push(this);
      var box = root.closest("[data-timeline-group]"), span = box && (box.dataset.spanPs || "").split(",").map(Number);
      if (span && span.length === 2 && isFinite(span[0]) && isFinite(span[1])) group.spanMs = [span[0] / PS_PER_MS, span[1] / PS_PER_MS];
      var self = this;
      ["mousedown", "wheel", "keydown", "focusin"].forEach(function (type) {
        root.addEventListener(type, function () { group.leader = self; }, true);
      });
    }
    window.reportgenTimeline.instances.push(this);
  }

  var groups = {};
  function groupOf(name) {
    if (groups[name]) return groups[name];
    var group = groups[name] = { members: [], leader: null, spanMs: null };
    var box = document.querySelector("[data-timeline-group='" + name + "']");
    var check = box && box.querySelector("[data-timeline-align-steps]");
    if (check) check.addEventListener("change", function () { alignOnSteps(group, check.checked, box); });
    return group;
  }

  /* The group's hosts shifted so that their first common step starts at one x (or back to the offsets the page
     was built with), said beside the option; each host's chart is built again on the new shared span. */
  function alignOnSteps(group, on, box) {
    var members = group.members.filter(function (m) { return m.ready; });
    var note = box.querySelector("[data-timeline-align-note]"), text = "";
    var base = function (m) { return (+m.root.dataset.offsetPs || 0) / PS_PER_MS; };
    var offsets = members.map(base);
    if (on) {
      var common = null;
      members.forEach(function (m) {
        var numbers = m.index.steps.map(function (s) { return s[0]; });
        common = common === null ? numbers : common.filter(function (n) { return numbers.indexOf(n) >= 0; });
      });
      var first = common && common.length ? Math.min.apply(null, common) : null;
      if (first === null) {
        text = "No step number is common to every host: the hosts keep their places.";
      } else {
        var startOf = function (m) { return m.index.steps.filter(function (s) { return s[0] === first; })[0][1] / PS_PER_MS; };
        var at = startOf(members[0]) + offsets[0];
        offsets = members.map(function (m) { return at - startOf(m); });
        text = "Aligned on step " + first + ": " + members.slice(1).map(function (m, i) {
          return m.host + " shifted by " + fmtSigned((offsets[i + 1] - base(m)) * PS_PER_MS, 1e3);
        }).join(", ") + " from its place above.";
      }
    }
    var lo = Infinity, hi = -Infinity;
    members.forEach(function (m, i) {
      lo = Math.min(lo, m.index.start / PS_PER_MS + offsets[i]);
      hi = Math.max(hi, m.index.end / PS_PER_MS + offsets[i]);
    });
    group.spanMs = [lo, hi];
    var leader = group.leader && group.leader.ready ? group.leader : members[0];
    var v = leader ? leader.view() : null;
    members.forEach(function (m, i) {
      m.offsetMs = offsets[i];
      m.root.dataset.alignedOffsetPs = String(Math.round(offsets[i] * PS_PER_MS));
    });
    members.forEach(function (m) { m.setLayout(m.pinned, m.hidden); });
    if (leader && v) {  // the leader keeps its view; the others move to show the same instants
      group.leader = leader;
      leader.setView(v[0], v[1]);
      leader.syncGroup();
    }
    if (note) note.textContent = text;
    box.dataset.alignedOnSteps = on ? "1" : "";
  }

  /* Every host of the group shows the leader's view (the same instants, on each host's own clock), and counts its
     ruler from the same origin. */
  Timeline.prototype.syncGroup = function () {
    if (!this.groupName) return;
    var group = groupOf(this.groupName);
    if (!group.leader) group.leader = this;
    if (group.leader !== this || group.syncing) return;
    group.syncing = true;
    var v = this.view(), self = this;
    try {
      group.members.forEach(function (other) {
        if (other === self || !other.ready || !other.chart) return;
        var shift = self.offsetMs - other.offsetMs;
        other.origin = self.origin ? { step: self.origin.step, ms: self.origin.ms + shift, host: self.host } : null;
        var o = other.view();
        if (Math.abs(o[0] - (v[0] + shift)) > 1e-9 || Math.abs(o[1] - (v[1] + shift)) > 1e-9) {
          other.setView(v[0] + shift, v[1] + shift);
        } else {
          other.drawRuler();
        }
      });
    } finally {
      group.syncing = false;
    }
  };

  Timeline.prototype.start = function () {
    var self = this;
    if (this.started) return this.started;
    this.say("Loading the timeline…");
    this.started = loadScript(this.host, this.base, "index").then(function (entry) {
      self.index = entry.payload;
      performance.mark("timeline-index");
      var hash = parseHash();
      if (!hash.host || hash.host === self.host) {
        var ints = function (text) { return (text || "").split(",").filter(Boolean).map(Number).filter(isFinite); };
        self.pinned = ints(hash.pin);
        self.hidden = ints(hash.hide);
      }
      self.build();
      performance.mark("timeline-built");
      self.openDefault();
      self.loadCounters();
      return self.update();
    }).then(function () {
      // The chart draws on the next animation frame: mark the first paint after it.
      return new Promise(function (resolve) {
        requestAnimationFrame(function () { performance.mark("timeline-raf1"); requestAnimationFrame(resolve); });
      });
    }).then(function () {
      self.ready = true;
      if (self.groupName) {  // a host that comes ready after the leader takes its view
        var group = groupOf(self.groupName);
        if (group.leader && group.leader !== self && group.leader.ready) group.leader.syncGroup();
        else group.leader = self;
      }
      self.root.dataset.ready = "1";
      if (window.performance && performance.mark) performance.mark("timeline-first-paint");
    }).catch(function (err) {
      self.say("The timeline could not be loaded: " + err.message);
      console.error(err);
    });
    return this.started;
  };

  /* The view a page opens on without a link: a representative step (the median step by duration, the earlier
     one of a tie) when the capture marks steps, since the whole capture is mostly idle host time around a few
     short steps; a single-file report's excerpt step, where it holds one. */
  Timeline.prototype.representativeStep = function () {
    var steps = this.index.steps;
    if (!steps.length) return null;
    var excerpt = this.index.whole && this.index.excerpt;
    if (excerpt && excerpt.step !== null && excerpt.step !== undefined) {
      var held = steps.filter(function (s) { return s[0] === excerpt.step; })[0];
      if (held) return held;
    }
    var order = steps.map(function (s, i) { return i; });
    order.sort(function (a, b) { return (steps[a][2] - steps[a][1]) - (steps[b][2] - steps[b][1]) || a - b; });
    return steps[order[(order.length - 1) >> 1]];
  };

  Timeline.prototype.openDefault = function () {
    var step = this.representativeStep();
    if (step) this.zoomToStep(step[0]);
  };

  /* The counter tracks' samples, read once (after the first view's data is asked for), then drawn. */
  Timeline.prototype.loadCounters = function () {
    var self = this, list = this.index.counters || [];
    this.counterData = this.counterData || {};
    return Promise.all(list.map(function (c) {
      return loadScript(self.host, self.base, c.key).then(decodeCounter).then(function (d) { self.counterData[c.key] = d; });
    })).then(function () {
      self.root.dataset.countersLoaded = String(list.length);
      self.drawOverlay();
    }).catch(function (err) { console.error(err); });
  };

  Timeline.prototype.say = function (text) { if (this.status) this.status.textContent = text; };

  Timeline.prototype.build = function () {
    var self = this, index = this.index;
    var span = [index.start / PS_PER_MS, index.end / PS_PER_MS];
    var shared = this.groupName && groupOf(this.groupName).spanMs;
    if (shared) span = [Math.min(span[0], shared[0] - this.offsetMs), Math.max(span[1], shared[1] - this.offsetMs)];
    this.span = span;
    var plugins = [];
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
      var stepsToggle = new fc.TogglePlugin("Steps  ·  " + fmtInt(index.steps.length) + " (click one to zoom to it)");
      // The first plugin now (the ruler above the canvas replaced the time grid row): no engine above it to resize.
      stepsToggle.getPrevEngine = function () { return { flexible: false }; };
      plugins.push(stepsToggle, stepsPlugin);
    }
    var onScreen = function (plugin) {
      var e = plugin.renderEngine, top = self.scroller.scrollTop, h = self.scroller.clientHeight || 600;
      return e.position + e.height >= top - h && e.position <= top + 2 * h;
    };
    // Every track has its plugin (this.tracks[k], k its index in the index), drawn or not: pinned tracks go first
    // under their own header, then each process not hidden with the rest of its tracks.
    this.tracks = index.tracks.map(function (track, k) {
      var plugin = new TrackPlugin(track, span);
      plugin.trackIndex = k;
      plugin.onScreen = onScreen;
      plugin.on("select", function (e) { self.onSelect(plugin, e.node); });
      return plugin;
    });
    var processes = [];
    index.tracks.forEach(function (track, k) {
      var last = processes[processes.length - 1];
      if (!last || last.process !== track.process) processes.push(last = { process: track.process, tracks: [] });
      last.tracks.push(k);
    });
    this.processes = processes;
    var pinned = this.pinned.filter(function (k) { return k >= 0 && k < index.tracks.length; });
    var groups = [];
    if (pinned.length) groups.push({ process: "Pinned tracks", tracks: pinned });
    processes.forEach(function (group, i) {
      if (self.hidden.indexOf(i) >= 0) return;
      var rest = group.tracks.filter(function (k) { return pinned.indexOf(k) < 0; });
      if (rest.length) groups.push({ process: group.process, tracks: rest });
    });
    // Counter tracks go under their process, after its tracks; a process of counters only gets a group of its own.
    var counters = index.counters || [], hiddenNames = this.hidden.map(function (i) { return processes[i] && processes[i].process; });
    counters.forEach(function (c) {
      if (hiddenNames.indexOf(c.process) >= 0) return;
      var group = groups.filter(function (g) { return g.process === c.process; })[0];
      if (!group) groups.push(group = { process: c.process, tracks: [] });
      (group.counters = group.counters || []).push(c);
    });
    this.counterPlugins = [];
    var byProcess = groups;
    groups.forEach(function (group) {
      var members = [];
      var header = new ProcessToggle(group.process, members);
      header.onToggle = function () { self.relayout(); };
      plugins.push(header);
      group.tracks.forEach(function (k) {
        var track = index.tracks[k], plugin = self.tracks[k];
        var toggle = new fc.TogglePlugin((pinned.indexOf(k) >= 0 ? track.process + " · " : "") + track.title +
                                         "  ·  " + fmtInt(track.events) + " events");
        members.push(toggle, plugin);
        plugins.push(toggle, plugin);
      });
      (group.counters || []).forEach(function (c) {
        // An empty track keeps the counter's room in the chart; the overlay draws its samples (drawCounters).
        var plugin = new TrackPlugin({ levels: 2, threads: [], title: c.name }, span);
        plugin.counter = c;
        var toggle = new fc.TogglePlugin(c.name + "  ·  counter, max " + fmtCounter(c.max, c.unit));
        members.push(toggle, plugin);
        plugins.push(toggle, plugin);
        self.counterPlugins.push(plugin);
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
    // Each track's own canvas is copied onto the chart's only where it is on screen (or a screen around it, as
    // onScreen draws): copying the off-screen ones onto a canvas thousands of pixels tall took a third of a frame.
    var copy = engine.copy.bind(engine);
    engine.copy = function (child) {
      var top = self.scroller.scrollTop, h = self.scroller.clientHeight || 600, at = child.position || 0;
      if (at + child.height >= top - h && at <= top + 2 * h) copy(child);
    };
    engine.render = function (prepare) {
      self.drawnFor = self.scroller.scrollTop;
      render(prepare);
      self.viewChanged();
      self.drawRuler();
      self.drawOverlay();
      self.syncGroup();
    };
    // The grid lines in the tracks fall on the ruler's ticks (flame-chart-js's own fall on powers of two of the span).
    engine.timeGrid.forEachTime = function (callback) {
      self.ticks().list.forEach(function (t) { callback(engine.timeToPosition(t.ms), t.ms); });
    };
    if (this.wired) return;  // the page's own listeners, once (a rebuilt chart keeps them)
    this.wired = true;
    this.scroller.addEventListener("scroll", function () {
      self.drawOverlay();
      // Tracks scrolled into view are drawn (off-screen ones were skipped), once per frame at most.
      var top = self.scroller.scrollTop, h = self.scroller.clientHeight;
      if (self.drawnFor === undefined || Math.abs(top - self.drawnFor) > h / 2) {
        self.drawnFor = top;
        self.chart.renderEngine.render();
      }
    });
    this.scroller.addEventListener("mousemove", function (e) { self.pointerMs = self.timeAt(e.clientX); });
    this.scroller.addEventListener("mouseleave", function () { self.pointerMs = undefined; });
    if (this.ruler) this.ruler.addEventListener("click", function (e) { self.rulerClick(e.clientX); });
    this.wireControls();
    this.wireArea();
    this.relayout();
    this.showLayout();
    window.addEventListener("resize", function () { self.relayout(); });
  };

  /* Pinned tracks and hidden processes are a layout of the chart's plugins: the chart is built again with the
     same view, data and selection (flame-chart-js cannot move a plugin). They go into the URL like the view. */
  Timeline.prototype.setLayout = function (pinned, hidden) {
    var view = this.view(), sel = this.selected && this.selected.key;
    this.pinned = pinned;
    this.hidden = hidden;
    this.chart.interactionsEngine.destroy();
    this.build();
    this.relayout();
    this.setView(view[0], view[1]);
    if (this.lastShown) this.show(this.lastShown.sets, this.lastShown.want);
    if (sel) {
      this.pendingSelect = sel;
      this.selected = null;
      this.reselect();
    }
    this.showLayout();
    this.writeHash();
  };

  Timeline.prototype.showLayout = function () {
    var box = this.root.querySelector("[data-timeline-layout]"), self = this;
    this.root.dataset.pinned = this.pinned.join(",");
    this.root.dataset.hiddenProcesses = this.hidden.join(",");
    if (!box) return;
    box.hidden = !this.pinned.length && !this.hidden.length;
    box.innerHTML = "";
    var parts = [];
    if (this.pinned.length) parts.push(fmtInt(this.pinned.length) + " pinned");
    if (this.hidden.length) {
      parts.push(fmtInt(this.hidden.length) + " process" + (this.hidden.length === 1 ? "" : "es") + " hidden (" +
        this.hidden.map(function (i) { return self.processes[i] ? self.processes[i].process : i; }).join(", ") + ")");
    }
    box.appendChild(document.createTextNode(parts.join(", ") + " "));
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = "Show all";
    b.addEventListener("click", function () { self.setLayout([], []); });
    box.appendChild(b);
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
    if (this.ruler) this.ruler.width = width;
    if (this.overlay) { this.overlay.width = width; this.overlay.height = this.scroller.clientHeight; }
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

  var RESLICE_MS = 120;  // while a zoom or pan goes on, the tracks' events follow the view at most this often

  Timeline.prototype.viewChanged = function () {
    var self = this;
    clearTimeout(this.updateTimer);
    this.updateTimer = setTimeout(function () { self.update(); }, 80);
    // A view that left the events the tracks hold (zoomed out, panned past half a view) is not left blank until
    // the zoom or pan ends: the data follows it, throttled, not only once it rests.
    if (this.mode && !this.resliceTimer && !this.sliceServes(true)) {
      this.resliceTimer = setTimeout(function () { self.resliceTimer = null; self.update(); }, RESLICE_MS);
    }
    clearTimeout(this.hashTimer);
    this.hashTimer = setTimeout(function () { self.writeHash(); }, 400);
  };

  /* The events that start in [p0, p1] ps, from the index's density (event starts per slice of the host's span,
     a slice cut by the range counted by its share in it); null for an index without it (format 1). */
  Timeline.prototype.eventsIn = function (p0, p1) {
    var index = this.index, d = index.density;
    if (!d || index.whole) return null;  // a single-file report's excerpt: its windows count its events
    var span = Math.max(index.end - index.start, 1), bin = span / d.bins, total = 0;
    var a = Math.max(0, (p0 - index.start) / bin), b = Math.min(d.bins, (p1 - index.start) / bin);
    for (var k = Math.floor(a); k < b; k++) total += d.counts[k] * (Math.min(b, k + 1) - Math.max(a, k));
    return total;
  };

  /* The files the current view needs, chosen from the events per pixel in the view: full-detail windows when
     the view holds at most DETAIL_EVENTS_PER_PX events per pixel (or the host has no tiles), else the coarsest
     tile level fine enough for one pixel. `slice`: the time range whose events the tracks are given (the view
     and half a view each side): flame-chart-js goes over every node it holds on each frame. */
  Timeline.prototype.wanted = function () {
    var index = this.index, v = this.view();
    var p0 = v[0] * PS_PER_MS, p1 = v[1] * PS_PER_MS, width = Math.max(this.canvas.width, 1);
    var margin = (p1 - p0) / 2, slice = [p0 - margin, p1 + margin];
    var windows = index.windows.filter(function (w) { return w.end >= slice[0] && w.start <= slice[1]; });
    if (!windows.length) windows = index.windows.slice(0, 1);
    var windowEvents = windows.reduce(function (a, w) { return a + w.events; }, 0);
    var inView = this.eventsIn(p0, p1), events = inView === null ? windowEvents : inView;
    var pixel = (p1 - p0) / width, chosen = -1;
    for (var L = 0; L < index.lod.length; L++) { if (index.lod[L].resolution <= pixel) { chosen = L; break; } }
    // Full detail where the view is sparse, and where no level is fine enough for its pixels (zoomed in past the
    // finest tiles, which the build stops at about a window's length: the view then holds few windows' events).
    var detail = inView === null ? windowEvents <= DETAIL_MAX_EVENTS : inView <= DETAIL_EVENTS_PER_PX * width;
    if (!index.lod.length || detail || (inView !== null && chosen < 0)) {
      return { kind: "detail", keys: windows.map(function (w) { return w.key; }), events: events, slice: slice,
               perPixel: events / width };
    }
    if (chosen < 0) chosen = index.lod.length - 1;
    var level = index.lod[chosen], keys = [], blocks = 0;
    var first = Math.floor((slice[0] - index.start) / level.tile), last = Math.floor((slice[1] - index.start) / level.tile);
    for (var t = Math.max(first, 0); t <= last; t++) {
      var tile = level.tiles[String(t)];
      if (tile) { keys.push(tile[0]); blocks += tile[1]; }
    }
    return { kind: "lod", level: chosen, keys: keys, events: events, blocks: blocks, resolution: level.resolution,
             slice: slice, perPixel: events / width };
  };

  /* Whether the events handed to the tracks still serve the view: it lies inside their slice, and (unless only
     `covered` is asked, as while a zoom goes on) the slice is not so much wider than the view (zoomed in since)
     that the tracks go over many nodes off screen. */
  Timeline.prototype.sliceServes = function (covered) {
    var s = this.mode && this.mode.slice;
    if (!s) return true;
    var v = this.view(), p0 = v[0] * PS_PER_MS, p1 = v[1] * PS_PER_MS;
    return p0 >= s[0] && p1 <= s[1] && (covered || (s[1] - s[0]) <= 4 * (p1 - p0));
  };

  Timeline.prototype.update = function () {
    var self = this;
    var want = this.wanted();
    var id = want.kind + ":" + want.keys.join(",");
    if ((id === this.shown && this.sliceServes()) || id === this.loading) return Promise.resolve();
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
    var rows = sets.reduce(function (a, set) { return a + set.n; }, 0);
    if (rows <= SLICE_MIN_ROWS) want.slice = null;  // every row handed: no slice to follow (sliceServes)
    var drawn = 0, slice = want.slice || [-Infinity, Infinity], s0 = slice[0], s1 = slice[1];
    sets.forEach(function (set) {
      var skip = {};
      if (!lod) set.carried.forEach(function (i) { if (loaded[owner(set.start[i])]) skip[i] = true; });
      for (var i = 0; i < set.n; i++) {
        if (set.start[i] > s1 || set.start[i] + set.dur[i] < s0 || skip[i]) continue;
        if (lod && set.count[i] === 1 && loaded[owner(set.start[i])] && owner(set.start[i]) !== set.key) continue;
        // A row's node is made once, when first handed to a track, and kept with its decoded file: a zoom or pan
        // hands most of the same rows again.
        var nodes = set.nodes || (set.nodes = new Array(set.n)), node = nodes[i];
        if (!node) {
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
          node = nodes[i] = { source: source, end: startMs + durMs, parent: null, level: set.level[i], index: 0 };
        }
        perTrack[set.track[i]].push(node);
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
    this.lastShown = { sets: sets, want: want };
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
    this.root.dataset.drawn = String(drawn);  // the events (or blocks) of the slice, handed to the tracks
    this.root.dataset.slice = want.slice ? want.slice.join(",") : "";
    this.root.dataset.perPixel = String(want.perPixel);
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

  // ---- time ruler, marks --------------------------------------------------------------------
  var UNITS = [["s", 1e3], ["ms", 1], ["µs", 1e-3], ["ns", 1e-6]];  // [name, ms per unit]
  var TICK_PX = 90;  // the least room between two ticks, for their labels

  Timeline.prototype.originMs = function () { return this.origin ? this.origin.ms : this.span[0]; };
  Timeline.prototype.originLabel = function () {
    if (!this.origin) return this.groupName ? "the first host's capture start" : "the capture start";
    return (this.origin.host ? this.origin.host + "'s " : "") + "step " + this.origin.step + " start";
  };

  Timeline.prototype.timeAt = function (clientX) {
    var v = this.view(), rect = this.canvas.getBoundingClientRect();
    return v[0] + (clientX - rect.left) / Math.max(this.canvas.width, 1) * (v[1] - v[0]);
  };

  Timeline.prototype.xOf = function (ms) {
    var v = this.view();
    return (ms - v[0]) / (v[1] - v[0]) * this.canvas.width;
  };

  /* Ticks 1, 2 or 5 × 10^n apart, at least TICK_PX apart, counted from the origin in the unit of their spacing
     (s, ms, µs or ns, as the zoom asks). Far from the origin the labels count from a base tick, which the
     ruler names at its left ("264.1 ms +"), so that a label stays short at any zoom. */
  Timeline.prototype.ticks = function () {
    var v = this.view(), width = Math.max(this.canvas.width, 1), target = (v[1] - v[0]) * TICK_PX / width;
    var p = Math.pow(10, Math.floor(Math.log10(target))), step = 10 * p;
    [1, 2, 5].some(function (m) { if (m * p >= target * (1 - 1e-9)) { step = m * p; return true; } return false; });
    var unit = UNITS.filter(function (u) { return step >= u[1] * (1 - 1e-9); })[0] || UNITS[UNITS.length - 1];
    var decimals = Math.max(0, Math.ceil(-Math.log10(step / unit[1]) - 1e-9));
    var origin = this.originMs(), base = origin, baseLabel = "";
    if (Math.max(Math.abs(v[0] - origin), Math.abs(v[1] - origin)) / unit[1] >= 10000) {
      base = origin + Math.floor((v[0] - origin) / (10 * step)) * 10 * step;
      baseLabel = fmtSigned((base - origin) * PS_PER_MS, step * PS_PER_MS) + " +";
    }
    var list = [];
    for (var k = Math.ceil((v[0] - base) / step); base + k * step <= v[1]; k++) {
      var value = k * step / unit[1];
      list.push({ ms: base + k * step, label: (Math.abs(value) < 1e-9 ? 0 : value).toFixed(decimals) + " " + unit[0] });
    }
    return { unit: unit[0], step: step, base: baseLabel, list: list };
  };

  Timeline.prototype.drawRuler = function () {
    var c = this.ruler;
    if (!c || !this.chart) return;
    var ctx = c.getContext("2d"), w = c.width, h = c.height, t = this.ticks(), self = this;
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = "#f6f8fa";
    ctx.fillRect(0, 0, w, h);
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    var measured = this.measure();
    if (measured) {  // the measured span between the last two marks, and its length
      var x0 = this.xOf(measured[0]), x1 = this.xOf(measured[1]);
      ctx.fillStyle = "rgba(9,105,218,0.15)";
      ctx.fillRect(x0, 0, x1 - x0, h);
    }
    ctx.fillStyle = "#59636e";
    t.list.forEach(function (tick) {
      var x = Math.round(self.xOf(tick.ms));
      ctx.fillRect(x, h - 6, 1, 6);
      ctx.fillText(tick.label, x + 3, h / 2 - 2);
    });
    var note = "from " + this.originLabel(), noteWidth = ctx.measureText(note).width + 8;
    ctx.fillStyle = "#f6f8fa";
    ctx.fillRect(w - noteWidth, 0, noteWidth, h);
    if (t.base) {  // the offset the labels count from, at the left as Perfetto shows it
      var baseWidth = ctx.measureText(t.base).width + 8;
      ctx.fillRect(0, 0, baseWidth, h);
      ctx.fillStyle = "#1f2328";
      ctx.fillText(t.base, 4, h / 2 - 2);
    }
    ctx.fillStyle = "#1f2328";
    ctx.fillText(note, w - noteWidth + 4, h / 2 - 2);
    ctx.fillStyle = "#0969da";
    this.marks.forEach(function (ms) {
      var x = Math.round(self.xOf(ms));
      ctx.fillRect(x, 0, 2, h);
      ctx.beginPath(); ctx.moveTo(x + 2, 0); ctx.lineTo(x + 9, 4); ctx.lineTo(x + 2, 8); ctx.fill();
    });
    if (measured) {
      var label = fmtDuration((measured[1] - measured[0]) * PS_PER_MS);
      var mid = (this.xOf(measured[0]) + this.xOf(measured[1])) / 2, lw = ctx.measureText(label).width + 8;
      ctx.fillStyle = "#0969da";
      ctx.fillRect(mid - lw / 2, h - 13, lw, 12);
      ctx.fillStyle = "#fff";
      ctx.fillText(label, mid - lw / 2 + 4, h - 7);
    }
    this.root.dataset.rulerUnit = t.unit;
    this.root.dataset.rulerOrigin = this.originLabel();
  };

  /* What lies over the tracks: the marks as lines, the measured span shaded. */
  Timeline.prototype.drawOverlay = function () {
    var c = this.overlay;
    if (!c || !this.chart) return;
    // The stage's height follows the toolbar above it (it wraps as controls appear): the overlay follows it.
    if (c.height !== this.scroller.clientHeight) c.height = this.scroller.clientHeight;
    var ctx = c.getContext("2d"), self = this, h = c.height;
    ctx.clearRect(0, 0, c.width, h);
    var measured = this.measure();
    if (measured) {
      ctx.fillStyle = "rgba(9,105,218,0.07)";
      ctx.fillRect(this.xOf(measured[0]), 0, this.xOf(measured[1]) - this.xOf(measured[0]), h);
    }
    ctx.fillStyle = "rgba(9,105,218,0.8)";
    this.marks.forEach(function (ms) { ctx.fillRect(Math.round(self.xOf(ms)), 0, 1, h); });
    this.drawCounters(ctx, h);
    var area = this.area || this.dragArea;
    if (area) this.drawArea(ctx, area, h);
    if (this.allFlows) this.drawAllFlows(ctx);
    if (this.flow) this.drawFlow(ctx);
  };

  /* Each counter track on screen as a step line over its room in the chart (a sample holds until the next), its
     scale from 0 to the counter's maximum, with the value at the view's end. */
  Timeline.prototype.drawCounters = function (ctx, h) {
    var plugins = this.counterPlugins || [], data = this.counterData || {}, top = this.scroller.scrollTop;
    var v = this.view(), width = this.canvas.width, drawn = 0, self = this;
    plugins.forEach(function (plugin) {
      var c = plugin.counter, d = data[c.key], e = plugin.renderEngine;
      if (!d || !e || e.collapsed || self.plugins.indexOf(plugin) < 0) return;
      var y0 = e.position - top + 2, room = e.height - 6;
      if (y0 + room < 0 || y0 > h) return;
      var scale = c.max > 0 ? room / c.max : 0, t = d.time, val = d.value, n = t.length;
      var p0 = v[0] * PS_PER_MS, lo = 0, hi = n - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (t[mid] <= p0) lo = mid; else hi = mid - 1; }
      ctx.beginPath();
      ctx.moveTo(0, y0 + room);
      var x = 0, y = t[lo] <= p0 ? y0 + room - val[lo] * scale : y0 + room, last = t[lo] <= p0 ? val[lo] : 0;
      ctx.lineTo(0, y);
      for (var i = lo; i < n; i++) {
        if (t[i] < p0) continue;
        var xi = self.xOf(t[i] / PS_PER_MS);
        if (xi > width) break;
        ctx.lineTo(xi, y);
        y = y0 + room - val[i] * scale;
        last = val[i];
        ctx.lineTo(xi, y);
        x = xi;
      }
      ctx.lineTo(width, y);
      ctx.lineTo(width, y0 + room);
      ctx.closePath();
      ctx.fillStyle = "rgba(26,127,55,0.18)";
      ctx.fill();
      ctx.strokeStyle = "rgba(26,127,55,0.9)";
      ctx.lineWidth = 1;
      ctx.stroke();
      ctx.font = "11px sans-serif";
      ctx.textBaseline = "top";
      var label = fmtCounter(last, c.unit), lw = ctx.measureText(label).width, lx = Math.max(4, width - lw - 24);
      ctx.fillStyle = "rgba(255,255,255,0.85)";  // the value at the view's end, readable over the line
      ctx.fillRect(lx - 2, y0, lw + 4, 13);
      ctx.fillStyle = "#1a7f37";
      ctx.fillText(label, lx, y0 + 1);
      drawn++;
    });
    this.root.dataset.countersDrawn = String(drawn);
  };

  /* The span between the last two marks, in time order, or null. */
  Timeline.prototype.measure = function () {
    var n = this.marks.length;
    if (n < 2) return null;
    var a = this.marks[n - 2], b = this.marks[n - 1];
    return a <= b ? [a, b] : [b, a];
  };

  Timeline.prototype.setMarks = function (marks) {
    this.marks = marks;
    var box = this.root.querySelector("[data-timeline-marks]"), text = this.root.querySelector("[data-timeline-measure]");
    var measured = this.measure();
    if (box) box.hidden = !marks.length;
    if (text) {
      text.textContent = fmtInt(marks.length) + " mark" + (marks.length === 1 ? "" : "s") +
        (measured ? "; the last two " + fmtDuration((measured[1] - measured[0]) * PS_PER_MS) + " apart" : "");
    }
    if (measured) this.root.dataset.measurePs = String(Math.round((measured[1] - measured[0]) * PS_PER_MS));
    else delete this.root.dataset.measurePs;
    this.drawRuler();
    this.drawOverlay();
  };

  /* A click on the ruler marks its time, or removes the mark under it. */
  Timeline.prototype.rulerClick = function (clientX) {
    var ms = this.timeAt(clientX), self = this;
    var near = this.marks.filter(function (m) { return Math.abs(self.xOf(m) - self.xOf(ms)) <= 4; });
    if (near.length) this.setMarks(this.marks.filter(function (m) { return near.indexOf(m) < 0; }));
    else this.setMarks(this.marks.concat([ms]));
  };

  /* M (as in Perfetto): mark the selected event's start and end, so that they are measured; with nothing
     selected, the time under the pointer (or the view's middle). */
  Timeline.prototype.markSelection = function () {
    if (this.area) {
      this.setMarks(this.marks.concat([this.area.t0, this.area.t1]));
      return;
    }
    if (this.selected) {
      var s = this.selected.node.source;
      this.setMarks(this.marks.concat([s.start, s.start + s.duration]));
      return;
    }
    var v = this.view();
    this.setMarks(this.marks.concat([this.pointerMs !== undefined ? this.pointerMs : (v[0] + v[1]) / 2]));
  };

  // ---- flows ---------------------------------------------------------------------------------
  /* Every flow of the host: bind_id → its events in time order [{ key, start, dur, track, level, name, cat }],
     read once from the windows' args (where the export writes bind_id, flow_in and flow_out), on the first
     selection of an event that has one. */
  Timeline.prototype.flowIndex = function () {
    if (this.flows) return this.flows;
    var self = this, index = this.index;
    this.flows = Promise.all(index.windows.map(function (w) {
      return Promise.all([loadScript(self.host, self.base, w.key).then(decodeColumns),
                          loadScript(self.host, self.base, w.args).then(decodeArgs)]);
    })).then(function (pairs) {
      var flows = {}, seen = {};
      pairs.forEach(function (pair) {
        var set = pair[0], objects = pair[1];
        for (var r = 0; r < set.n; r++) {
          var obj = objects[r];
          if (!obj || obj.bind_id === undefined) continue;
          var key = set.track[r] + ":" + set.level[r] + ":" + set.start[r];
          if (seen[key]) continue;
          seen[key] = true;
          (flows[obj.bind_id] = flows[obj.bind_id] || []).push({
            key: key, start: set.start[r], dur: set.dur[r], track: set.track[r], level: set.level[r],
            name: set.name[r] >= 0 ? set.names[set.name[r]] : "", cat: obj.cat || "" });
        }
      });
      Object.keys(flows).forEach(function (id) { flows[id].sort(function (a, b) { return a.start - b.start; }); });
      self.forget(index.windows.map(function (w) { return w.key; }));
      return flows;
    });
    return this.flows;
  };

  /* The selected event's flow: its arrows drawn hop by hop (from each event's end to the next one's start, both
     directions of the selection), and the hops listed under its details with [ and ] to follow them. */
  Timeline.prototype.showFlow = function (key, id, panel) {
    var self = this;
    this.flowIndex().then(function (flows) {
      if (!self.selected || self.selected.key !== key) return;
      var members = flows[id] || [];
      var at = members.map(function (m) { return m.key; }).indexOf(key);
      if (members.length < 2 || at < 0) return;
      self.flow = { id: id, members: members, at: key, index: at };
      self.root.dataset.flow = JSON.stringify(members.map(function (m) { return m.key; }));
      var box = document.createElement("div");
      box.className = "timeline-flow";
      box.dataset.timelineFlow = "";
      var p = document.createElement("p");
      p.textContent = "Flow " + id + (members[0].cat ? " (" + members[0].cat + ")" : "") + ": " + fmtInt(members.length) +
        " events, this is " + fmtInt(at + 1) + ". [ and ] go to the previous and next hop.";
      box.appendChild(p);
      var ol = document.createElement("ol");
      members.forEach(function (m, i) {
        var li = document.createElement("li");
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = m.name + " · " + self.index.tracks[m.track].title + " · " +
          fmtSigned(m.start - self.originMs() * PS_PER_MS, Math.max(m.dur / 1000, 1e3));
        if (i === at) li.className = "current";
        b.addEventListener("click", function () { self.followFlow(i - at); });
        li.appendChild(b);
        ol.appendChild(li);
      });
      box.appendChild(ol);
      var args = panel.querySelector("[data-timeline-args]");
      panel.insertBefore(box, args);
      self.drawOverlay();
      self.root.dataset.flowShown = key;
    }).catch(function (err) { console.error(err); });
  };

  /* The selection moves `step` hops along its flow (Perfetto's ] and [); the view moves only as far as it takes
     to show both ends of the hop. */
  Timeline.prototype.followFlow = function (step) {
    var flow = this.flow;
    if (!flow) return Promise.resolve();
    var to = flow.index + step;
    if (to < 0 || to >= flow.members.length) return Promise.resolve();
    var from = flow.members[flow.index], target = flow.members[to];
    var v = this.view(), lo = Math.min(from.start, target.start) / PS_PER_MS;
    var hi = Math.max(from.start + from.dur, target.start + target.dur) / PS_PER_MS;
    var keep = lo >= v[0] && hi <= v[1];
    if (!keep) {  // the same zoom where both ends fit, else zoomed out just enough
      var width = Math.max(v[1] - v[0], (hi - lo) * 1.2), mid = (lo + hi) / 2;
      this.setView(mid - width / 2, mid + width / 2);
    }
    this.flow = { id: flow.id, members: flow.members, at: target.key, index: to };
    return this.goTo(target, true);
  };

  Timeline.prototype.drawnTrack = function (k) {
    var p = this.tracks[k];
    return p && p.renderEngine && this.plugins.indexOf(p) >= 0 ? p : null;
  };

  Timeline.prototype.yOf = function (track, level) {
    if (!this.drawnTrack(track)) return NaN;  // a hidden process's track: no end to draw there
    var e = this.tracks[track].renderEngine;
    return e.position - this.scroller.scrollTop + (e.collapsed ? 0 : level * (BLOCK + 1) + BLOCK / 2);
  };

  Timeline.prototype.drawHop = function (ctx, a, b) {
      var x0 = this.xOf((a.start + a.dur) / PS_PER_MS), y0 = this.yOf(a.track, a.level);
      var x1 = this.xOf(b.start / PS_PER_MS), y1 = this.yOf(b.track, b.level);
      if (b.start < a.start + a.dur) x0 = this.xOf(b.start / PS_PER_MS);  // a hop out of a still running event
      ctx.beginPath();
      ctx.moveTo(x0, y0);
      var mid = (x0 + x1) / 2;
      ctx.bezierCurveTo(mid, y0, mid, y1, x1, y1);
      ctx.stroke();
      ctx.beginPath();  // the arrowhead, at the receiving end
      ctx.moveTo(x1, y1);
      ctx.lineTo(x1 - 7, y1 - 4);
      ctx.lineTo(x1 - 7, y1 + 4);
      ctx.fill();
  };

  Timeline.prototype.drawFlow = function (ctx) {
    var m = this.flow.members, drawn = 0;
    ctx.strokeStyle = "rgba(130,80,223,0.95)";
    ctx.fillStyle = "rgba(130,80,223,0.95)";
    ctx.lineWidth = 1.5;
    for (var i = 0; i + 1 < m.length; i++) {
      if (!this.drawnTrack(m[i].track) || !this.drawnTrack(m[i + 1].track)) continue;
      this.drawHop(ctx, m[i], m[i + 1]);
      drawn++;
    }
    this.root.dataset.flowArrows = String(drawn);
  };

  var MAX_FLOW_HOPS = 400;  // "all flows" draws at most this many hops; past it, every n-th one (and says so)

  /* Every hop of the capture's flows that crosses the view (of the chosen category), as XProf and Perfetto
     draw them all on request; thinned evenly at low zoom so that the tracks stay readable. */
  Timeline.prototype.drawAllFlows = function (ctx) {
    var hops = this.allFlows.hops, cat = this.allFlows.cat, v = this.view(), p0 = v[0] * PS_PER_MS, p1 = v[1] * PS_PER_MS;
    var inView = [];
    for (var i = 0; i < hops.length; i++) {
      var h = hops[i];
      if ((cat && h[0].cat !== cat) || h[2] > p1 || h[3] < p0) continue;  // its category, its time across the view
      if (!this.drawnTrack(h[0].track) || !this.drawnTrack(h[1].track)) continue;
      inView.push(h);
    }
    var stride = Math.max(1, Math.ceil(inView.length / MAX_FLOW_HOPS)), drawn = 0;
    ctx.strokeStyle = "rgba(130,80,223,0.45)";
    ctx.fillStyle = "rgba(130,80,223,0.45)";
    ctx.lineWidth = 1;
    for (var j = 0; j < inView.length; j += stride) { this.drawHop(ctx, inView[j][0], inView[j][1]); drawn++; }
    this.root.dataset.allFlowHops = String(inView.length);
    this.root.dataset.allFlowArrows = String(drawn);
    var note = this.root.querySelector("[data-timeline-flows-note]");
    if (note) {
      note.textContent = inView.length > drawn ? fmtInt(drawn) + " of " + fmtInt(inView.length) + " hops (thinned; zoom in for all)"
                                               : fmtInt(drawn) + " hops";
    }
  };

  Timeline.prototype.setAllFlows = function (on, cat) {
    var self = this;
    if (!on) { this.allFlows = null; this.drawOverlay(); return Promise.resolve(); }
    return this.flowIndex().then(function (flows) {
      var hops = [], cats = {};
      Object.keys(flows).forEach(function (id) {
        var m = flows[id];
        if (m.length > 1) cats[m[0].cat] = (cats[m[0].cat] || 0) + 1;
        for (var i = 0; i + 1 < m.length; i++) {
          var a = m[i], b = m[i + 1], t0 = Math.min(a.start + a.dur, b.start);
          hops.push([a, b, t0, Math.max(t0, b.start)]);
        }
      });
      self.allFlows = { hops: hops, cat: cat || "" };
      var select = self.root.querySelector("[data-timeline-flow-cat]");
      if (select && select.options.length <= 1) {  // XProf's flow categories, as the capture names them
        Object.keys(cats).sort().forEach(function (c) {
          var o = document.createElement("option");
          o.value = c;
          o.textContent = (c || "(none)") + " (" + fmtInt(cats[c]) + ")";
          select.appendChild(o);
        });
        select.hidden = false;
      }
      self.drawOverlay();
    });
  };

  // ---- area selection ------------------------------------------------------------------------
  /* Mouse modes, as XProf's trace viewer has them (1 select, 2 pan): in pan mode a drag pans (flame-chart-js's
     own drag) and Shift-drag selects an area; in select mode a drag selects. A click selects an event in both. */
  Timeline.prototype.setMouseMode = function (mode) {
    this.mouseMode = mode;
    this.root.dataset.mouseMode = mode;
    this.root.querySelectorAll("[data-timeline-mode]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.timelineMode === mode));
    });
    this.canvas.style.cursor = mode === "select" ? "crosshair" : "";
  };

  /* The tracks whose rows a drag from canvas y0 to y1 crosses (collapsed ones left out). */
  Timeline.prototype.tracksBetween = function (y0, y1) {
    var lo = Math.min(y0, y1), hi = Math.max(y0, y1);
    return this.tracks.filter(function (p) {
      var e = p.renderEngine;
      if (!e || this.plugins.indexOf(p) < 0) return false;
      return !e.collapsed && e.height > 0 && e.position <= hi && e.position + e.height >= lo;
    }, this).map(function (p) { return p.trackIndex; });
  };

  Timeline.prototype.wireArea = function () {
    var self = this, drag = null;
    this.setMouseMode("pan");
    this.root.querySelectorAll("[data-timeline-mode]").forEach(function (b) {
      b.addEventListener("click", function () { self.setMouseMode(b.dataset.timelineMode); });
    });
    function canvasPoint(e) {
      var rect = self.canvas.getBoundingClientRect();
      return { x: e.clientX - rect.left, y: e.clientY - rect.top };
    }
    // Captured on the way down, so that flame-chart-js (listening on the canvas) never starts its drag.
    this.scroller.addEventListener("mousedown", function (e) {
      if (e.button !== 0 || !(self.mouseMode === "select" || e.shiftKey)) return;
      e.stopPropagation();
      e.preventDefault();
      var pt = canvasPoint(e);
      drag = { x0: pt.x, y0: pt.y, t0: self.timeAt(e.clientX), moved: false };
    }, true);
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var pt = canvasPoint(e);
      if (Math.abs(pt.x - drag.x0) > 3 || Math.abs(pt.y - drag.y0) > 3) drag.moved = true;
      if (!drag.moved) return;
      var t1 = self.timeAt(e.clientX);
      self.dragArea = { t0: Math.min(drag.t0, t1), t1: Math.max(drag.t0, t1), tracks: self.tracksBetween(drag.y0, pt.y) };
      self.drawOverlay();
    }, true);
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      e.stopPropagation();
      var was = drag;
      drag = null;
      var area = self.dragArea;
      self.dragArea = null;
      if (!was.moved) {  // a click: flame-chart-js selects what is under the pointer, as without the mode
        self.chart.interactionsEngine.handleMouseDown();
        self.chart.interactionsEngine.handleMouseUp();
        return;
      }
      if (area && area.tracks.length && area.t1 > area.t0) self.selectArea(area);
      else self.drawOverlay();
    }, true);
  };

  Timeline.prototype.drawArea = function (ctx, area, h) {
    var x0 = this.xOf(area.t0), x1 = this.xOf(area.t1), top = this.scroller.scrollTop, self = this;
    ctx.fillStyle = "rgba(9,105,218,0.12)";
    area.tracks.forEach(function (k) {
      if (!self.drawnTrack(k)) return;
      var e = self.tracks[k].renderEngine;
      ctx.fillRect(x0, e.position - top, x1 - x0, e.height);
    });
    ctx.fillStyle = "rgba(9,105,218,0.9)";
    ctx.fillRect(Math.round(x0), 0, 1, h);
    ctx.fillRect(Math.round(x1), 0, 1, h);
    if (!this.highlight || area !== this.area) return;
    // The highlighted row's slices: an outline around each drawn one in the area.
    var n = 0;
    ctx.strokeStyle = "#cf222e";
    ctx.lineWidth = 2;
    area.tracks.forEach(function (k) {
      if (!self.drawnTrack(k)) return;
      var plugin = self.tracks[k], e = plugin.renderEngine;
      plugin.flatTree.forEach(function (node) {
        var src = node.source;
        if (src.count !== 1 || src.name !== self.highlight || src.start >= area.t1 || src.start + src.duration <= area.t0) return;
        n++;
        var a = Math.max(self.xOf(src.start), -2), b = Math.min(self.xOf(src.start + src.duration), self.canvas.width + 2);
        ctx.strokeRect(a, e.position - top + node.level * (BLOCK + 1), Math.max(b - a, 1), BLOCK);
      });
    });
    this.root.dataset.highlighted = String(n);
  };

  /* The slices of the area's tracks that overlap its range, from the full-detail windows (whatever the zoom
     draws), counted as Perfetto's area selection counts them: a slice cut by the range counts only its part
     inside it (wall), less its children's parts inside it (self); every slice overlapping the range is one
     occurrence. Resolves to rows { name, count, wall, self, max } in ps. */
  Timeline.prototype.aggregate = function (area) {
    var self = this, index = this.index, p0 = area.t0 * PS_PER_MS, p1 = area.t1 * PS_PER_MS;
    var wanted = {};
    area.tracks.forEach(function (k) { wanted[k] = true; });
    var windows = index.windows.filter(function (w) { return w.end >= p0 && w.start <= p1; });
    return Promise.all(windows.map(function (w) {
      return loadScript(self.host, self.base, w.key).then(decodeColumns);
    })).then(function (sets) {
      self.forget(windows.map(function (w) { return w.key; }));
      var seen = {}, byLevel = {};  // "track:level" → [[start, end, name], …]
      sets.forEach(function (set) {
        var carried = {};
        set.carried.forEach(function (i) { carried[i] = true; });
        for (var r = 0; r < set.n; r++) {
          if (!wanted[set.track[r]]) continue;
          var a = set.start[r], b = a + set.dur[r];
          if (b <= p0 || a >= p1) continue;
          var id = set.track[r] + ":" + set.level[r] + ":" + a;
          if (carried[r] || seen[id]) {  // an event still running in a later window: counted once
            if (seen[id]) continue;
            seen[id] = true;
          }
          var key = set.track[r] + ":" + set.level[r];
          (byLevel[key] = byLevel[key] || []).push([a, b, set.name[r] >= 0 ? set.names[set.name[r]] : ""]);
        }
      });
      var clip = function (a, b) { return Math.min(b, p1) - Math.max(a, p0); };
      var selfOf = {};
      Object.keys(byLevel).forEach(function (key) {
        var list = byLevel[key].sort(function (x, y) { return x[0] - y[0]; });
        selfOf[key] = list.map(function (e) { return clip(e[0], e[1]); });
      });
      // Each child's part inside the range leaves its parent's self time: the parent is the event one level up,
      // on the same thread, that holds the child's start.
      Object.keys(byLevel).forEach(function (key) {
        var parts = key.split(":"), k = +parts[0], level = +parts[1];
        var track = index.tracks[k], threads = track.threads || [];
        if (threads.some(function (t) { return t.level === level; })) return;  // a thread's first level
        var parents = byLevel[k + ":" + (level - 1)];
        if (!parents) return;
        byLevel[key].forEach(function (child) {
          var lo = 0, hi = parents.length - 1, at = -1;
          while (lo <= hi) { var mid = (lo + hi) >> 1; if (parents[mid][0] <= child[0]) { at = mid; lo = mid + 1; } else hi = mid - 1; }
          if (at >= 0 && parents[at][1] > child[0]) selfOf[k + ":" + (level - 1)][at] -= clip(child[0], child[1]);
        });
      });
      var rows = {};
      Object.keys(byLevel).forEach(function (key) {
        byLevel[key].forEach(function (e, i) {
          var row = rows[e[2]] || (rows[e[2]] = { name: e[2], count: 0, wall: 0, self: 0, max: 0 });
          var wall = clip(e[0], e[1]);
          row.count++;
          row.wall += wall;
          row.self += selfOf[key][i];
          if (wall > row.max) row.max = wall;
        });
      });
      return Object.keys(rows).map(function (name) { return rows[name]; });
    });
  };

  var AREA_COLUMNS = [
    { key: "name", title: "Name" }, { key: "count", title: "Occurrences", num: true },
    { key: "wall", title: "Wall", num: true }, { key: "self", title: "Self", num: true },
    { key: "avg", title: "Average wall", num: true }, { key: "max", title: "Max wall", num: true }
  ];

  Timeline.prototype.selectArea = function (area) {
    var self = this;
    this.area = area;
    this.highlight = null;
    this.selected = null;
    this.tracks.forEach(function (p) { p.selectedRegion = null; });
    this.chart.render();
    this.drawOverlay();
    var panel = this.details;
    panel.hidden = false;
    panel.innerHTML = "";
    delete this.root.dataset.areaReady;
    var h = document.createElement("h4");
    h.textContent = "Selected range · " + fmtDuration((area.t1 - area.t0) * PS_PER_MS);
    panel.appendChild(h);
    var originPs = this.originMs() * PS_PER_MS, res = (area.t1 - area.t0) * PS_PER_MS / 1e4;
    var titles = area.tracks.map(function (k) { return self.index.tracks[k].title; });
    var names = titles.slice(0, 4).join(", ") + (titles.length > 4 ? " and " + fmtInt(titles.length - 4) + " more" : "");
    var about = document.createElement("p");
    about.textContent = "From " + fmtSigned(area.t0 * PS_PER_MS - originPs, res) + " to " +
      fmtSigned(area.t1 * PS_PER_MS - originPs, res) + " (from " + this.originLabel() + "), over " +
      fmtInt(area.tracks.length) + " track" + (area.tracks.length === 1 ? "" : "s") + ": " + names + ".";
    panel.appendChild(about);
    var how = document.createElement("p");
    how.className = "muted";
    how.textContent = "Counted as Perfetto counts an area: a slice cut by the range counts only its part inside it " +
      "(wall; self is wall less its children's parts inside it), each slice overlapping the range once, at any " +
      "zoom. Click a row to outline its slices; Esc clears the range.";
    panel.appendChild(how);
    var status = document.createElement("p");
    status.textContent = "Counting…";
    panel.appendChild(status);
    this.aggregate(area).then(function (rows) {
      if (self.area !== area) return;
      rows.forEach(function (r) { r.avg = r.wall / r.count; });
      self.areaRows = rows;
      self.areaSort = { key: "wall", desc: true };
      status.textContent = fmtInt(rows.length) + " names, " +
        fmtInt(rows.reduce(function (a, r) { return a + r.count; }, 0)) + " slices. ";
      var csv = document.createElement("button");
      csv.type = "button";
      csv.textContent = "Download CSV";
      csv.addEventListener("click", function () { self.downloadAreaCsv(); });
      status.appendChild(csv);
      var table = document.createElement("table");
      table.className = "timeline-area";
      table.dataset.timelineArea = "";
      panel.appendChild(table);
      self.renderAreaTable(table);
      self.root.dataset.areaReady = "1";
    }).catch(function (err) { status.textContent = "The range could not be counted: " + err.message; });
  };

  Timeline.prototype.sortedAreaRows = function () {
    var sort = this.areaSort, rows = this.areaRows.slice();
    rows.sort(function (a, b) {
      var x = a[sort.key], y = b[sort.key];
      var c = typeof x === "string" ? x.localeCompare(y) : x - y;
      return (sort.desc ? -c : c) || a.name.localeCompare(b.name);
    });
    return rows;
  };

  Timeline.prototype.renderAreaTable = function (table) {
    var self = this;
    table.innerHTML = "";
    var head = table.createTHead().insertRow();
    AREA_COLUMNS.forEach(function (col) {
      var th = document.createElement("th");
      if (col.num) th.className = "num";
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = col.title;
      th.dataset.key = col.key;
      th.setAttribute("aria-sort", self.areaSort.key !== col.key ? "none" : self.areaSort.desc ? "descending" : "ascending");
      b.addEventListener("click", function () {
        var desc = self.areaSort.key === col.key ? !self.areaSort.desc : col.key !== "name";
        self.areaSort = { key: col.key, desc: desc };
        self.renderAreaTable(table);
      });
      th.appendChild(b);
      head.appendChild(th);
    });
    var body = table.createTBody();
    this.sortedAreaRows().forEach(function (r) {
      var tr = body.insertRow();
      tr.dataset.name = r.name;
      tr.dataset.values = JSON.stringify([r.count, r.wall, r.self, r.max]);
      if (self.highlight === r.name) tr.className = "highlighted";
      AREA_COLUMNS.forEach(function (col) {
        var td = tr.insertCell();
        if (col.key === "name") { td.textContent = r.name; td.className = "name"; return; }
        td.className = "num";
        td.textContent = col.key === "count" ? fmtInt(r.count) : fmtDuration(r[col.key]);
      });
      tr.addEventListener("click", function () {
        self.highlight = self.highlight === r.name ? null : r.name;
        delete self.root.dataset.highlighted;
        self.renderAreaTable(table);
        self.drawOverlay();
      });
    });
  };

  /* The table as CSV, in µs; a name a spreadsheet would read as a formula gets a leading apostrophe, as the
     site's CSV files do (output/site.py). */
  Timeline.prototype.areaCsv = function () {
    var cell = function (text) {
      if (/^[=+\-@\t\r']/.test(text) && !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) text = "'" + text;
      return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
    };
    var lines = ["name,occurrences,wall_us,self_us,average_us,max_us"];
    this.sortedAreaRows().forEach(function (r) {
      lines.push([cell(r.name), r.count, psToUs(r.wall), psToUs(r.self), psToUs(r.avg), psToUs(r.max)].join(","));
    });
    return lines.join("\n") + "\n";
  };

  Timeline.prototype.downloadAreaCsv = function () {
    var a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([this.areaCsv()], { type: "text/csv" }));
    a.download = "timeline-" + this.host + "-range.csv";
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  };

  Timeline.prototype.clearArea = function () {
    if (!this.area) return;
    this.area = null;
    this.highlight = null;
    this.clearDetails();
    this.drawOverlay();
  };

  Timeline.prototype.clearDetails = function () {
    this.details.innerHTML = "";
    this.detailsShownFor = null;
    delete this.root.dataset.selected;
    var p = document.createElement("p");
    p.className = "muted";
    p.textContent = "Click an event for its details.";
    this.details.appendChild(p);
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
    this.area = null;  // a clicked event replaces the area selection, as in Perfetto
    var key = eventKey(plugin.trackIndex, node);
    if (!this.flow || this.flow.at !== key) { this.flow = null; delete this.root.dataset.flow; }
    this.selected = { key: key, plugin: plugin, node: node };
    this.showDetails(plugin, node);
    this.writeHash();
    this.drawOverlay();
  };

  Timeline.prototype.select = function (plugin, node) {
    this.tracks.forEach(function (p) { p.selectedRegion = null; });
    plugin.selectedRegion = { data: node, type: "node" };
    this.onSelect(plugin, node);
    this.chart.render();
    if (!this.drawnTrack(plugin.trackIndex)) return;
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
    h.title = src.name;  // two lines shown (the docked panel is short); the whole name on hover
    panel.appendChild(h);
    var dl = document.createElement("dl");
    panel.appendChild(dl);
    var thread = track.threads.filter(function (t) { return node.level >= t.level && node.level < t.level + t.levels; })[0];
    row(dl, "Process", track.process);
    row(dl, "Thread", thread ? thread.name : track.title);
    var originPs = this.originMs() * PS_PER_MS, resolution = src.dps / 1000, from = " from " + this.originLabel();
    row(dl, "Start", fmtSigned(src.ps - originPs, resolution) + from, "num").dataset.field = "start";
    row(dl, "Duration", fmtDuration(src.dps), "num").dataset.field = "dur";
    row(dl, "End", fmtSigned(src.ps + src.dps - originPs, resolution) + from, "num");
    // The trace files' own numbers (µs, as Perfetto and chrome://tracing show them), to find the event there.
    var files = row(dl, "In the trace files", "ts " + psToUs(src.ps) + " µs, dur " + psToUs(src.dps) + " µs", "num");
    files.dataset.field = "file_times";
    files.dataset.ts = psToUs(src.ps);
    files.dataset.dur = psToUs(src.dps);
    row(dl, "Nesting level", String(node.level - (thread ? thread.level : 0)));
    this.detailsShownFor = eventKey(plugin.trackIndex, node);
    this.detailsLod = src.lod;
    var buttons = document.createElement("p");
    var focus = document.createElement("button");
    focus.type = "button";
    focus.textContent = "Zoom to this event (F)";
    focus.addEventListener("click", function () { self.focusSelected(); });
    buttons.appendChild(focus);
    var k = plugin.trackIndex, isPinned = this.pinned.indexOf(k) >= 0;
    var pin = document.createElement("button");
    pin.type = "button";
    pin.dataset.timelinePin = "";
    pin.textContent = isPinned ? "Unpin this track" : "Pin this track to the top";
    pin.addEventListener("click", function () {
      self.setLayout(isPinned ? self.pinned.filter(function (x) { return x !== k; }) : self.pinned.concat([k]), self.hidden);
    });
    buttons.appendChild(document.createTextNode(" "));
    buttons.appendChild(pin);
    var ordinal = -1;
    this.processes.forEach(function (g, i) { if (g.tracks.indexOf(k) >= 0) ordinal = i; });
    var hide = document.createElement("button");
    hide.type = "button";
    hide.dataset.timelineHide = "";
    hide.textContent = "Hide process " + track.process;
    hide.addEventListener("click", function () {
      self.selected = null;
      self.flow = null;
      self.clearDetails();  // its event is not drawn any more
      self.setLayout(self.pinned.filter(function (x) { return self.processes[ordinal].tracks.indexOf(x) < 0; }),
                     self.hidden.concat([ordinal]));
    });
    buttons.appendChild(document.createTextNode(" "));
    buttons.appendChild(hide);
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
      if (obj.bind_id !== undefined) self.showFlow(eventKey(plugin.trackIndex, node), obj.bind_id, panel);
    }).catch(function (err) { args.textContent = "Arguments could not be loaded: " + err.message; });
  };

  Timeline.prototype.showMerged = function (plugin, node) {
    var self = this, src = node.source, panel = this.details;
    panel.hidden = false;
    panel.innerHTML = "";
    var p = document.createElement("p");
    p.textContent = fmtInt(src.count) + " events of " + plugin.track.title + " merged between " +
      fmtSigned(src.ps - this.originMs() * PS_PER_MS, src.dps / 1000) + " and " +
      fmtSigned(src.ps + src.dps - this.originMs() * PS_PER_MS, src.dps / 1000) + " from " + this.originLabel() +
      " (each shorter than one pixel at this zoom).";
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
    var s = data.data.source, fields, from = fmtSigned(s.ps - this.originMs() * PS_PER_MS, s.dps / 1000);
    if (s.count > 1) {
      fields = [{ text: s.name + " merged" }, { text: "from " + from + ", over " + fmtDuration(s.dps) },
                { text: "click, then Zoom in (or W) to see them" }];
    } else {
      fields = [{ text: s.name }, { text: "duration " + fmtDuration(s.dps) }, { text: "start " + from + " (from " + this.originLabel() + ")" }];
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
    this.origin = { step: step[0], ms: t0 };
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

  /* Every event whose name or long name contains `text` (any case), on the tracks whose title or process contains
     `trackFilter`, in time order: the windows are read one after the other (and dropped again), an event carried
     into later windows found once. Resolves to [{ key, start, dur, track, name }] (ps). */
  Timeline.prototype.findAll = function (text, trackFilter) {
    var self = this, index = this.index, needle = text.toLowerCase(), tf = (trackFilter || "").toLowerCase();
    var tracksOk = index.tracks.map(function (t) {
      return !tf || (t.title + "\n" + t.process).toLowerCase().indexOf(tf) >= 0;
    });
    var matches = [], seen = {}, i = 0;
    function next() {
      if (i >= index.windows.length) return Promise.resolve();
      var w = index.windows[i++];
      return loadScript(self.host, self.base, w.key).then(decodeColumns).then(function (set) {
        self.forget([w.key]);
        var hit = set.names.map(function (n) { return n.toLowerCase().indexOf(needle) >= 0; });
        for (var r = 0; r < set.n; r++) {
          if (!tracksOk[set.track[r]]) continue;
          if (!(set.name[r] >= 0 && hit[set.name[r]]) && !(set.longName[r] >= 0 && hit[set.longName[r]])) continue;
          var key = set.track[r] + ":" + set.level[r] + ":" + set.start[r];
          if (seen[key]) continue;
          seen[key] = true;
          matches.push({ key: key, start: set.start[r], dur: set.dur[r], track: set.track[r],
                         name: set.name[r] >= 0 ? set.names[set.name[r]] : "" });
        }
        return next();
      });
    }
    return next().then(function () {
      matches.sort(function (a, b) { return a.start - b.start || a.track - b.track; });
      return matches;
    });
  };

  var LISTED_MATCHES = 500;  // the matches list shows this many around the current one; the count is exact

  /* The matches of the find box and the track filter, computed once per pair of texts. */
  Timeline.prototype.findState = function () {
    var input = this.root.querySelector("[data-timeline-search]"), filter = this.root.querySelector("[data-timeline-track-filter]");
    var text = input ? input.value.trim() : "", tf = filter ? filter.value.trim() : "";
    if (this.found && this.found.text === text && this.found.filter === tf) return Promise.resolve(this.found);
    var self = this, state = { text: text, filter: tf, matches: null, at: -1 };
    this.found = state;
    if (!text) { this.showMatches(); return Promise.resolve(state); }
    this.say("Searching for “" + text + "”…");
    state.ready = this.findAll(text, tf).then(function (matches) {
      state.matches = matches;
      return state;
    });
    return state.ready;
  };

  /* Enter: the next match, Shift+Enter: the previous one (as in Perfetto), from the view's start for a new search;
     past the last, the first again. */
  Timeline.prototype.findStep = function (dir) {
    var self = this;
    return this.findState().then(function (state) {
      if (self.found !== state || !state.text) return;
      var m = state.matches;
      if (!m.length) {
        self.showMatches();
        self.say("No event named like “" + state.text + "”" + (state.filter ? " on tracks named like “" + state.filter + "”" : "") + ".");
        return;
      }
      if (state.at < 0) {
        var from = self.view()[0] * PS_PER_MS, i = 0;
        while (i < m.length && m[i].start < from) i++;
        state.at = dir > 0 ? i % m.length : (i - 1 + m.length) % m.length;
      } else {
        state.at = (state.at + dir + m.length) % m.length;
      }
      return self.goToMatch(state.at);
    });
  };

  Timeline.prototype.goToMatch = function (i) {
    var state = this.found;
    state.at = i;
    this.showMatches();
    return this.goTo(state.matches[i]);
  };

  Timeline.prototype.showMatches = function () {
    var state = this.found, count = this.root.querySelector("[data-timeline-count]");
    var list = this.root.querySelector("[data-timeline-matches]"), self = this;
    var m = state && state.matches;
    if (count) count.textContent = m ? (state.at >= 0 ? fmtInt(state.at + 1) : "–") + " / " + fmtInt(m.length) : "";
    if (m) this.root.dataset.matches = String(m.length); else delete this.root.dataset.matches;
    if (!list) return;
    list.hidden = !m;
    list.innerHTML = "";
    if (!m) return;
    var first = Math.max(0, Math.min(state.at - (LISTED_MATCHES >> 1), m.length - LISTED_MATCHES));
    var shown = m.slice(first, first + LISTED_MATCHES);
    var head = document.createElement("p");
    head.className = "muted";
    head.textContent = m.length ? "Matches " + fmtInt(first + 1) + "–" + fmtInt(first + shown.length) + " of " + fmtInt(m.length) +
      " (click one to go to it)" : "No match.";
    list.appendChild(head);
    var ol = document.createElement("ol");
    ol.start = first + 1;
    var originPs = this.originMs() * PS_PER_MS;
    shown.forEach(function (match, j) {
      var li = document.createElement("li");
      var b = document.createElement("button");
      b.type = "button";
      b.dataset.match = String(first + j);
      b.textContent = fmtSigned(match.start - originPs, Math.max(match.dur / 1000, 1e3)) + " · " +
        self.index.tracks[match.track].title + " · " + match.name;
      b.title = b.textContent;  // the list is narrow: the whole line on hover
      if (first + j === state.at) { li.className = "current"; b.setAttribute("aria-current", "true"); }
      b.addEventListener("click", function () { self.goToMatch(first + j); });
      li.appendChild(b);
      ol.appendChild(li);
    });
    list.appendChild(ol);
    var current = ol.querySelector(".current");
    if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest" });
  };

  /* The first match of `text` from the view's start (kept for links and scripts: the find box's Enter). */
  Timeline.prototype.search = function (text) {
    var input = this.root.querySelector("[data-timeline-search]");
    if (input && text !== undefined) input.value = text;
    this.found = null;
    return this.findStep(1);
  };

  Timeline.prototype.wireControls = function () {
    var self = this, root = this.root;
    var search = root.querySelector("[data-timeline-search]");
    if (search) {
      search.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); self.findStep(e.shiftKey ? -1 : 1); }
      });
      search.addEventListener("input", function () { self.found = null; self.showMatches(); });
    }
    var allFlows = root.querySelector("[data-timeline-all-flows]"), flowCat = root.querySelector("[data-timeline-flow-cat]");
    if (allFlows) {
      var flowsChanged = function () { self.setAllFlows(allFlows.checked, flowCat ? flowCat.value : ""); };
      allFlows.addEventListener("change", flowsChanged);
      if (flowCat) flowCat.addEventListener("change", flowsChanged);
    }
    var filter = root.querySelector("[data-timeline-track-filter]");
    if (filter) {
      filter.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); self.findStep(e.shiftKey ? -1 : 1); }
      });
      filter.addEventListener("input", function () { self.found = null; self.showMatches(); });
    }
    root.querySelectorAll("[data-timeline-find]").forEach(function (b) {
      b.addEventListener("click", function () { self.findStep(b.dataset.timelineFind === "prev" ? -1 : 1); });
    });
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
    if (reset) {
      reset.addEventListener("click", function () {
        self.origin = null;
        if (step) step.value = "";
        self.setView(self.span[0], self.span[1]);
      });
    }
    var clear = root.querySelector("[data-timeline-clear-marks]");
    if (clear) clear.addEventListener("click", function () { self.setMarks([]); });
    // Wheel scrolls the tracks; with Ctrl (or Alt) it zooms, as in Perfetto.
    this.scroller.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.altKey && !e.metaKey && Math.abs(e.deltaY) >= Math.abs(e.deltaX)) e.stopPropagation();
    }, true);
    document.addEventListener("keydown", function (e) { self.onKey(e, true); });
    document.addEventListener("keyup", function (e) { self.onKey(e, false); });
  };

  Timeline.prototype.active = function () {
    if (this.groupName) {  // of every host's timelines only the leader takes keys (the others follow it)
      var group = groupOf(this.groupName);
      if (group.leader && group.leader !== this && group.leader.root.offsetParent !== null) return false;
    }
    return this.ready && this.root.offsetParent !== null;
  };

  /* W/S zoom in/out around the view's centre, A/D pan, F focuses the selection, while held. */
  Timeline.prototype.onKey = function (e, down) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    if (e.ctrlKey || e.metaKey || e.altKey || !this.active()) return;
    var key = (e.key || "").toLowerCase();
    if (down && key === "f") { this.focusSelected(); return; }
    if (down && key === "m") { this.markSelection(); return; }
    if (down && (key === "1" || key === "2")) { this.setMouseMode(key === "1" ? "select" : "pan"); return; }
    if (down && key === "escape") { this.clearArea(); return; }
    if (down && (key === "]" || key === "[")) { this.followFlow(key === "]" ? 1 : -1); return; }
    if ("wasd".indexOf(key) < 0 || key.length !== 1) return;
    e.preventDefault();
    if (!down) { delete this.held[key]; return; }
    if (this.held[key]) return;
    this.held[key] = true;
    var self = this, last = performance.now();
    if (this.keyLoop) return;
    function tick(now) {
      // Wall time, not frames: a slow frame zooms as far as the time it took (capped at 1 s, a tab in the background).
      var dt = Math.min(now - last, 1000);
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
    if (this.pinned.length) parts.push("pin=" + this.pinned.join(","));
    if (this.hidden.length) parts.push("hide=" + this.hidden.join(","));
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
    // A link that names no range and no step looks in the whole capture, not in the step the page opened on.
    if ((params.q || params.sel) && params.step === undefined && !(isFinite(t0) && isFinite(t1) && t1 > t0)) this.setView(this.span[0], this.span[1]);
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
