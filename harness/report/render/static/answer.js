(function(){
  "use strict";
  // The "paste your error" box: harness/catalogue/explain.py's rules, over the answers file
  // (render/answers.py). Every text goes on the page through textContent.
  var G = {{ status_glyphs }};
  var box = document.getElementById("ask"), out = document.getElementById("lookup-out");
  var D = null, waiting = null, requested = false;
  function el(tag, text, cls){ var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
  // the file's coded rows (render/answers.py's _coded): per environment a value's index in
  // base 62, "." for none, two characters each where there are more than 62 values
  var DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  function decode(coded, row, f){
    var w = coded.values.length > DIGITS.length ? 2 : 1, text = coded.rows[row];
    for (var e = 0; e * w < text.length; e++) {
      var c = text.substr(e * w, w);
      if (c.charAt(0) === ".") continue;
      var i = w === 1 ? DIGITS.indexOf(c) : DIGITS.indexOf(c.charAt(0)) * DIGITS.length + DIGITS.indexOf(c.charAt(1));
      f(e, coded.values[i]);
    }
  }
  // answers.js: every entry but its variants (what an error is matched against)
  var byId = {};
  window.harnessAnswers = function(data){
    data.entries.forEach(function(e, k){
      byId[e.id] = e;
      // its variants' part (answers/NNNN.js): NNNN its place over the entries a part holds
      var n = String(Math.floor(k / data.part_entries));
      while (n.length < 4) n = "0" + n;
      e.part = "answers/" + n + ".js";
      // [variant, message, runs, envs] -> [variant, type, message, runs, envs]
      e.seen = e.seen.map(function(s){ var m = data.messages[s[1]]; return [s[0], m[0], m[1], s[2], s[3]]; });
    });
    D = data;
    if (waiting) { var f = waiting; waiting = null; f(); }
  };
  // a part (answers/NNNN.js): its entries' variants
  var parts = {}, partsWaiting = [];
  window.harnessVariants = function(part){
    part.entries.forEach(function(x){
      var e = byId[x[0]];
      if (!e) return;
      x[1].forEach(function(v){
        v.envs = []; v.cellList = [];
        decode(v.rates, 0, function(i, r){ v.envs.push([i].concat(r)); });
        e.slices.forEach(function(_, si){ decode(v.cells, si, function(i, c){ v.cellList.push([i, si].concat(c)); }); });
        v.cellList.sort(function(x, y){ var a = e.slices[x[1]], b = e.slices[y[1]]; return x[0] - y[0] || (a < b ? -1 : a > b ? 1 : 0); });  // as explain lists them
        v.not_counted.forEach(function(nc){ nc[1] = part.reasons[nc[1]]; });
        v.title = v.kind.replace("_", " ") + (v.ref ? " (" + v.ref + ")" : "") + (v.description ? ": " + v.description : "");
      });
      e.variants = x[1];
    });
    settle();
  };
  function settle(){
    var still = [];
    partsWaiting.forEach(function(w){
      if (w.entries.some(function(e){ return !e.variants && parts[e.part] !== "failed"; })) still.push(w);
      else setTimeout(w.f, 0);
    });
    partsWaiting = still;
  }
  // f() once the variants of ``entries`` are loaded (or their parts could not be)
  function withVariants(entries, f){
    partsWaiting.push({entries: entries, f: f});
    entries.forEach(function(e){
      if (e.variants || parts[e.part]) return;
      parts[e.part] = "requested";
      var s = document.createElement("script");
      s.src = e.part;
      s.onerror = function(){ parts[e.part] = "failed"; settle(); };
      document.head.appendChild(s);
    });
    settle();
  }
  function missing(entries){
    var names = [];
    entries.forEach(function(e){ if (!e.variants && names.indexOf(e.part) < 0) names.push(e.part); });
    return names;
  }
  function withData(f){
    if (D) { f(); return; }
    waiting = f;
    if (requested) return;
    requested = true;
    var s = document.createElement("script");
    s.src = box.getAttribute("data-answers");
    s.onerror = function(){ out.textContent = ""; out.appendChild(el("p", "The answers are missing: " + s.src + " could not be loaded.")); };
    document.head.appendChild(s);
  }
  box.addEventListener("focusin", function(){ withData(function(){}); });

  // -- what the user pasted (explain.parse_error) -------------------------------------------
  var TERMINAL = /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\ufffd\[[0-9;]*m/g;
  function stripTerminal(t){ return t.replace(TERMINAL, ""); }
  var EXC = "(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure|Failed|Iteration)";
  var LOOSE = new RegExp("^\\s*(?:\\S.*?:\\d+: )?((?:[A-Za-z_]\\w*\\.)*\\w*" + EXC + ")(?::[ \\t]?(.*))?$");
  var AT_START = new RegExp("^\\s*((?:[A-Za-z_]\\w*\\.)*\\w*" + EXC + ")(?::[ \\t]?(.*))?$");
  function firstException(line){ var m = AT_START.exec(line); return m && !/Warning$/.test(m[1]) ? m : LOOSE.exec(line); }
  var IN_TRACEBACK = /^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::[ \t]?(.*))?$/;
  var TRACEBACK = "Traceback (most recent call last):";
  var CHAIN = ["During handling of the above exception", "The above exception was the direct cause"];
  function startsChain(line){ return line.indexOf(TRACEBACK) === 0 || CHAIN.some(function(c){ return line.indexOf(c) === 0; }); }
  function messageLines(lines, start, first){
    var outLines = [first];
    for (var i = start + 1; i < lines.length && !startsChain(lines[i]); i++) outLines.push(lines[i]);
    return outLines.join("\n").trim();
  }
  function parseError(text){
    text = text.slice(-PASTE_CHARS);  // explain reads the last 32 KiB too (a traceback's end)
    var cleaned = stripTerminal(text).replace(/\r\n/g, "\n").replace(/\r/g, "\n").replace(/^\[(?:rank|default)\d+\]:[ \t]?/gm, "");
    var lines = cleaned.split("\n"), found = [], i = 0, m;
    while (i < lines.length) {
      if (lines[i].trim() !== TRACEBACK) { i++; continue; }
      var j = i + 1;
      while (j < lines.length && (!lines[j].trim() || " \t".indexOf(lines[j].charAt(0)) >= 0)) j++;
      if (j < lines.length) {
        m = IN_TRACEBACK.exec(lines[j].trim()) || LOOSE.exec(lines[j]);
        if (m) found.push({type: m[1], message: messageLines(lines, j, m[2] || "")});
      }
      i = j + 1;
    }
    if (!found.length) {
      // a log's warnings come before the error (explain.py's parse_error)
      var loose = [];
      for (var k = 0; k < lines.length; k++) {
        m = firstException(lines[k]);
        if (m && (m[2] || "").trim()) loose.push([k, m]);
      }
      var errors = loose.filter(function(p){ return !/Warning$/.test(p[1][1]); });
      if (!errors.length) errors = loose;
      if (errors.length) {
        var types = {}; errors.forEach(function(p){ types[p[1][1]] = 1; });
        var pick = errors.length > 1 && Object.keys(types).length === 1 ? errors[errors.length - 1] : errors[0];
        found.push({type: pick[1][1], message: messageLines(lines, pick[0], pick[1][2] || "")});
      }
    }
    if (!found.length) {
      var message = cleaned.split(/\s+/).filter(Boolean).join(" ");
      return message ? [{type: "", message: message}] : [];
    }
    return found.reverse();
  }
  function raisedText(r){ return r.type ? r.type + ": " + r.message : r.message; }

  // -- which entries (explain.match_entries) -------------------------------------------------
  function lastPart(t){ var p = t.split("."); return p[p.length - 1]; }
  function sameType(asked, known){ return !asked || !known || lastPart(asked) === lastPart(known); }
  function shape(t){
    t = stripTerminal(t).replace(/0x[0-9a-fA-F]+/g, "0x#").replace(/(?:[A-Za-z]:)?(?:[\/\\][\w.+~-]+){2,}[\/\\]?/g, "/…").replace(/\d+(?:\.\d+)*/g, "#");
    return t.split(/\s+/).filter(Boolean).join(" ");
  }
  // difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), as explain compares messages
  function longest(a, b, b2j, alo, ahi, blo, bhi){
    var besti = alo, bestj = blo, best = 0, j2len = {};
    for (var i = alo; i < ahi; i++) {
      var next = {}, js = b2j[a.charAt(i)] || [];
      for (var x = 0; x < js.length; x++) {
        var j = js[x];
        if (j < blo) continue;
        if (j >= bhi) break;
        var k = next[j] = (j2len[j - 1] || 0) + 1;
        if (k > best) { besti = i - k + 1; bestj = j - k + 1; best = k; }
      }
      j2len = next;
    }
    return [besti, bestj, best];
  }
  function ratio(a, b){
    var b2j = {}, matches = 0, queue = [[0, a.length, 0, b.length]];
    for (var j = 0; j < b.length; j++) (b2j[b.charAt(j)] = b2j[b.charAt(j)] || []).push(j);
    while (queue.length) {
      var q = queue.pop(), m = longest(a, b, b2j, q[0], q[1], q[2], q[3]), i = m[0], jj = m[1], k = m[2];
      if (!k) continue;
      matches += k;
      if (q[0] < i && q[2] < jj) queue.push([q[0], i, q[2], jj]);
      if (i + k < q[1] && jj + k < q[3]) queue.push([i + k, q[1], jj + k, q[3]]);
    }
    return a.length + b.length ? 2 * matches / (a.length + b.length) : 1;
  }
  function similarity(a, b){ a = a.toLowerCase().slice(0, 400); b = b.toLowerCase().slice(0, 400); return a && b ? ratio(a, b) : 0; }
  // each pattern compiled once; only those the harness checked ("" where one may backtrack
  // catastrophically or past two ambiguous repetitions in a row, spec/backtracking.py),
  // searched in a message's first MATCH_CHARS: a browser cannot interrupt a RegExp, so the
  // size bounds the rest (two repetitions on 1,000 characters: under a second; on 2,000: 7 s)
  var patterns = {}, MATCH_CHARS = 1000, PASTE_CHARS = 32 * 1024;
  function hits(sig, r){
    if (!sameType(r.type, sig[0])) return false;
    var re = patterns[sig[1]];
    if (re === undefined) { try { re = sig[1] ? new RegExp(sig[1], "s") : null; } catch (e) { re = null; } patterns[sig[1]] = re; }
    return re !== null && re.test(r.message.slice(0, MATCH_CHARS));
  }
  function seenHits(r, type, message){
    if (!sameType(r.type, type)) return false;
    var mine = shape(r.message), theirs = shape(message);
    if (!mine || !theirs) return false;
    if (mine === theirs) return true;
    var short = mine.length <= theirs.length ? mine : theirs, long = short === mine ? theirs : mine;
    return short.length >= 24 && long.indexOf(short) >= 0;
  }
  var RANK = {documented: 0, related: 1, seen: 2, guess: 3};
  function entryMatch(e, raised){
    var i, j;
    for (i = 0; i < raised.length; i++) if (hits(e.signature, raised[i])) return {e: e, how: "documented", what: e.signature[2], runs: 0, raised: raised[i]};
    for (i = 0; i < raised.length; i++) for (j = 0; j < e.related.length; j++) {
      var rel = e.related[j];
      if (hits([rel[1], rel[2]], raised[i])) return {e: e, how: "related", what: rel[3], variant: rel[0], runs: 0, raised: raised[i]};
    }
    for (i = 0; i < raised.length; i++) {
      var best = null;
      e.seen.forEach(function(s){
        if (seenHits(raised[i], s[1], s[2]) && (!best || s[3] > best.runs)) best = {e: e, how: "seen", what: s[1] + ": " + s[2], variant: e.names[s[0]], runs: s[3], raised: raised[i]};
      });
      if (best) return best;
    }
    return null;
  }
  function guess(e, r){
    var texts = [e.signature[2]].concat(e.related.map(function(x){ return x[3]; }), e.seen.map(function(s){ return s[1] + ": " + s[2]; }));
    var mine = shape(r.message), best = null;
    texts.forEach(function(t){
      var cut = t.indexOf(": "), score = similarity(mine, shape(cut >= 0 ? t.slice(cut + 2) : t));
      if (!best || score > best.score) best = {e: e, how: "guess", what: t, score: score, runs: 0};
    });
    return best;
  }
  function matchEntries(raised){
    var found = [];
    D.entries.forEach(function(e){ var m = entryMatch(e, raised); if (m) found.push(m); });
    if (found.length) return found.sort(function(x, y){ return RANK[x.how] - RANK[y.how] || y.runs - x.runs || (x.e.id < y.e.id ? -1 : 1); });
    if (!raised.length) return [];
    return D.entries.map(function(e){ return guess(e, raised[0]); })
      .filter(function(g){ return g && g.score >= 0.3; })
      .sort(function(x, y){ return y.score - x.score || (x.e.id < y.e.id ? -1 : 1); }).slice(0, 3);
  }

  // -- which versions (explain.choose_envs; a series asked for is its newest measured release) --
  function release(t){
    var m = /^v?(\d+(?:\.\d+)*)((?:a|b|rc|\.?post|\.?dev)\d*)*$/i.exec(t);
    return m ? m[1].split(".").map(Number) : null;
  }
  function asked(t){
    t = t.trim().split("+")[0];
    var series = /\.[x*]$/i.test(t);
    t = t.replace(/\.[x*]$/i, "");
    var r = release(t);
    return r ? {want: r, series: series || r.length < 3} : null;
  }
  function cmp(x, y){ for (var i = 0; i < Math.max(x.length, y.length); i++) { var a = x[i] || 0, b = y[i] || 0; if (a !== b) return a < b ? -1 : 1; } return 0; }
  function agrees(a, installed){
    var r = release(installed);
    if (!r) return false;
    if (a.series) return cmp(r.slice(0, a.want.length), a.want) === 0 && r.length >= a.want.length;
    return cmp(r, a.want) === 0;  // 2.0 is 2.0.0
  }
  function below(a, r){ return a.series ? cmp(r.slice(0, a.want.length), a.want) < 0 : cmp(r, a.want) < 0; }
  function envOf(e, i){ var x = D.envs[e.envs[i]]; return {i: i, id: x[0], torch: x[1], lightning: x[2], python: x[3]}; }
  function envsOf(e){ return e.envs.map(function(_, i){ return envOf(e, i); }); }
  function names(envs, axis){ var seen = []; envs.forEach(function(x){ if (seen.indexOf(x[axis]) < 0) seen.push(x[axis]); }); return seen.join(", "); }
  function newest(envs, axis){  // of a series asked for, its newest measured release
    var top = null;
    envs.forEach(function(x){ var r = release(x[axis]); if (r && (!top || cmp(r, top) > 0)) top = r; });
    return envs.filter(function(x){ var r = release(x[axis]); return r && cmp(r, top) === 0; });
  }
  function agreeing(envs, a, axis){
    var same = envs.filter(function(x){ return agrees(a, x[axis]); });
    return a.series && same.length ? newest(same, axis) : same;
  }
  function nearest(envs, a, axis){
    var rs = [];
    envs.forEach(function(x){ var r = release(x[axis]); if (r && !agrees(a, x[axis]) && !rs.some(function(y){ return cmp(y, r) === 0; })) rs.push(r); });
    rs.sort(cmp);
    var lo = rs.filter(function(r){ return below(a, r); }), hi = rs.filter(function(r){ return !below(a, r); });
    var chosen = lo.slice(-1).concat(hi.slice(0, 1));
    return envs.filter(function(x){ var r = release(x[axis]); return r && chosen.some(function(c){ return cmp(c, r) === 0; }); });
  }
  function chooseEnvs(e, torchText, lightningText){
    var envs = envsOf(e), uses = e.lightning;
    var t = torchText ? asked(torchText) : null;
    if (!t) return {exact: false, envs: envs, said: torchText ? "torch " + JSON.stringify(torchText) + " is not a version: every measured environment" : "torch unknown: every measured environment"};
    var l = lightningText && uses ? asked(lightningText) : null;
    var same = agreeing(envs, t, "torch");
    var only = uses ? "" : " (the entry does not import lightning: any lightning gives this answer)";
    var said;
    if (same.length && !l) {
      said = "measured at torch " + names(same, "torch");
      if (!uses) said += " beside lightning " + names(same, "lightning") + only;
      else if (!lightningText) said += ", lightning unknown: with lightning " + names(same, "lightning");
      else said += "; lightning " + JSON.stringify(lightningText) + " is not a version: with lightning " + names(same, "lightning");
      return {exact: true, envs: same, said: said};
    }
    if (same.length) {
      var both = agreeing(same, l, "lightning");
      if (both.length) return {exact: true, envs: both, said: "measured at torch " + names(both, "torch") + " + lightning " + names(both, "lightning")};
      var nl = nearest(same, l, "lightning");
      return {exact: false, envs: nl, said: "lightning " + lightningText + " was not measured with torch " + names(same, "torch") + "; the nearest measured: lightning " + names(nl, "lightning") + " (torch " + names(nl, "torch") + ")"};
    }
    var nt = nearest(envs, t, "torch");
    if (!nt.length) return {exact: false, envs: [], said: "no environment was measured"};
    var chosen = [], torches = [];
    nt.forEach(function(x){ if (torches.indexOf(x.torch) < 0) torches.push(x.torch); });
    torches.forEach(function(tr){
      var group = nt.filter(function(x){ return x.torch === tr; });
      if (l) {
        var s = agreeing(group, l, "lightning");
        group = s.length ? s : (nearest(group, l, "lightning").slice(-1).length ? nearest(group, l, "lightning").slice(-1) : group);
      }
      chosen = chosen.concat(group);
    });
    said = "torch " + torchText + " was not measured; the nearest measured: " + chosen.map(function(x){ return "torch " + x.torch + (uses ? " + lightning " + x.lightning : ""); }).filter(function(x, i, all){ return all.indexOf(x) === i; }).join("; ") + only;
    return {exact: false, envs: chosen, said: said};
  }

  // -- the answer (explain.advise: the report's advice rule, "in most applicable scenarios")
  var Z = 1.959963984540054, EPS = 1e-12;
  function wilson(k, n){
    var p = k / n, z2 = Z * Z, denom = 1 + z2 / n, centre = (p + z2 / (2 * n)) / denom;
    var half = Z * Math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom;
    return [k === 0 ? 0 : Math.max(0, centre - half), k === n ? 1 : Math.min(1, centre + half)];
  }
  function most(k, n){ var w = wilson(k, n); if (w[0] > 0.5 + EPS) return "confirmed"; if (0.5 > w[1] + EPS) return "contradicted"; return "inconclusive"; }
  var ADVICE = {
    workaround: {confirmed: "works", contradicted: "does not work", inconclusive: "not settled", "not measurable": "not measured"},
    dead_end: {confirmed: "fails as documented: avoid it", contradicted: "does not fail as documented", "not as documented": "fails, not as documented: avoid it", inconclusive: "not settled", "not measurable": "not measured"},
    baseline: {confirmed: "the documented error reproduces", contradicted: "the documented error does not reproduce", inconclusive: "not settled", "not measurable": "not measured"}
  };
  var DID = {workaround: "ok", dead_end: "failed as documented", baseline: "reproduced"};
  function advise(kind, s, all){
    kind = ADVICE[kind] ? kind : "workaround";
    var overall = all[1] ? most(all[0], all[1]) : "not measurable";
    var where = kind !== "baseline" ? " where the documented error reproduces" : "";
    var also = "; over every measured version " + all[0] + "/" + all[1];
    if (!s.n) {
      var text;
      if (s.na && kind !== "baseline") text = "not judged here: the documented error did not reproduce in these cells; where it ran it was " + DID[kind] + " in " + s.ka + "/" + s.na + " scenarios";
      else text = "no applicable run here" + (s.reasons ? " (" + s.reasons + ")" : "");
      if (all[1]) text += also + " (" + ADVICE[kind][overall] + ")";
      return ["not measurable", text];
    }
    // every run here agrees: what they did is the answer (explain.py's advise)
    if ((s.k === 0 || s.k === s.n) && !s.flaky && s.runs) {
      var every = s.k === s.n, verdict = every ? "confirmed" : "contradicted";
      if (kind === "dead_end" && !every && s.ok < s.n) verdict = "not as documented";
      return [verdict, ADVICE[kind][verdict] + ": " + (every ? DID[kind] : "not " + DID[kind]) + " in every run here (" + s.runs + " run" + (s.runs !== 1 ? "s" : "") + " in " + (s.n === 1 ? "the one setup" : "all " + s.n + " setups") + where + ")" + also];
    }
    var advice = most(s.k, s.n), counts = DID[kind] + " in " + s.k + "/" + s.n + " scenarios here" + where;
    // a dead end failing in most scenarios, not as documented: avoid it all the same (explain.py's advise)
    if (kind === "dead_end" && advice !== "confirmed" && most(s.n - s.ok, s.n) === "confirmed")
      return ["not as documented", ADVICE[kind]["not as documented"] + ": failed in " + (s.n - s.ok) + "/" + s.n + " scenarios here" + where + ", as documented in " + s.k + also];
    if (advice === "inconclusive") {
      var agree = (overall === "confirmed" && s.k * 2 > s.n) || (overall === "contradicted" && s.k * 2 < s.n);
      if (agree) return [overall, ADVICE[kind][overall] + ": " + counts + ", too few to call alone, as over every measured version (" + all[0] + "/" + all[1] + ")"];
      return ["inconclusive", "not settled: " + counts + " (n=" + s.n + ")" + also];
    }
    return [advice, ADVICE[kind][advice] + ": " + counts + also];
  }
  // the mark of an answer, and its row's class: as the terminal's (cli/explain.py's _MARK)
  var MARK = {"workaround confirmed": ["✔", "a-ok"], "workaround contradicted": ["✖", "a-bad"], "dead_end confirmed": ["✖", "a-bad"], "dead_end contradicted": ["!", "a-open"], "dead_end not as documented": ["✖", "a-bad"], "baseline confirmed": ["✖", "a-bad"], "baseline contradicted": ["○", "a-absent"], "control confirmed": ["✔", "a-ok"], "control contradicted": ["✖", "a-bad"]};
  function mark(kind, advice){ return advice === "inconclusive" ? ["?", "a-open"] : (MARK[kind + " " + advice] || ["–", "a-none"]); }
  function variantHere(e, v, chosen){
    var on = {}, s = {k: 0, n: 0, ka: 0, na: 0, ok: 0, cells: [], instead: ""};
    chosen.forEach(function(x){ on[x.i] = true; });
    v.envs.forEach(function(r){ if (on[r[0]]) { s.k += r[1]; s.n += r[2]; s.ka += r[3]; s.na += r[4]; s.ok += r[5]; } });
    v.cellList.forEach(function(c){ if (on[c[0]]) s.cells.push(c); });
    s.runs = 0; s.flaky = false;
    s.cells.forEach(function(c){
      var counted = 0;
      for (var i = 2; i < c.length; i += 2) if (NOT_COUNTED.indexOf(D.statuses[c[i]]) < 0) { s.runs += c[i + 1]; counted++; }
      if (counted > 1 || D.statuses[c[2]] === "flaky") s.flaky = true;
    });
    var vi = e.variants.indexOf(v);
    var raised = e.seen.filter(function(m){ return m[0] === vi && m[4].some(function(i){ return on[i]; }); });
    if (raised.length) s.instead = raised[0][1] + ": " + raised[0][2];
    s.reasons = v.not_counted.filter(function(nc){ return nc[3].some(function(i){ return on[i]; }); }).slice(0, 2)
      .map(function(nc){ return nc[0].replace("_", " ") + ": " + nc[1]; }).join("; ");
    var a = advise(v.kind, s, v.all);
    s.advice = a[0]; s.words = a[1];
    return s;
  }
  function cellText(e, c){  // explain's CellSeen.text
    var counts = [];
    for (var i = 2; i < c.length; i += 2) counts.push(D.statuses[c[i]].replace("_", " ") + " " + c[i + 1]);
    return e.slices[c[1]] + " " + counts.join(", ");
  }
  // one glyph per slice for the chosen environments: the heatmap's, their trials together
  function sliceCells(e, cells){
    var per = {};
    cells.forEach(function(c){
      var p = per[c[1]] = per[c[1]] || {};
      for (var i = 2; i < c.length; i += 2) p[c[i]] = (p[c[i]] || 0) + c[i + 1];
    });
    return per;
  }
  var NOT_COUNTED = ["unsupported", "skipped", "env_failed"];
  function statusOf(counts){
    var keys = Object.keys(counts).map(Number).sort(function(a, b){ return a - b; });
    var counted = keys.filter(function(k){ return NOT_COUNTED.indexOf(D.statuses[k]) < 0; });
    if (counted.length > 1) return D.statuses.indexOf("flaky");
    if (counted.length) return counted[0];
    return keys.reduce(function(best, k){ return counts[k] > counts[best] ? k : best; }, keys[0]);
  }
  function statusTd(counts){
    var td = el("td");
    if (!counts) { td.textContent = "not run"; return td; }
    var s = statusOf(counts);
    td.className = "c s" + s;
    td.textContent = G[s];
    td.title = Object.keys(counts).map(function(k){ return D.statuses[k].replace("_", " ") + " ×" + counts[k]; }).join(", ");
    return td;
  }
  function heading(e, extra){
    var h = el("h3"), a = el("a", e.title);
    a.href = "#e-" + e.slug;
    h.appendChild(a);
    if (e.title !== e.id) h.appendChild(el("small", " " + e.id));
    if (extra) h.appendChild(el("span", extra, "guess"));
    return h;
  }
  var HOW = {documented: "the documented signature", related: "the related error of variant ", seen: "a message the runs raised ("};
  function howText(m){
    if (m.how === "related") return HOW.related + m.variant;
    if (m.how === "seen") return HOW.seen + m.variant + ", ×" + m.runs + ")";
    return HOW.documented;
  }
  function legend(){
    return el("p", "✔ works (a workaround), or the error does not reproduce · ✖ does not work, the error reproduces, or a dead end fails as documented (avoid it) · ! a dead end that does not fail as documented · ? not settled: too few runs · – not measured here. The cells are the heatmaps' (legend at the top): these versions' runs per device and precision.", "legend-words");
  }
  function variantTable(e, chosen, kinds, detailed){
    var t = el("table"), head = el("tr");
    var cols = ["", "Variant", "For your versions"].concat(detailed ? ["What it is"] : e.slices.concat(["What it is"]));
    cols.forEach(function(h){ head.appendChild(el("th", h)); });
    t.appendChild(head);
    kinds.forEach(function(group){
      var vs = e.variants.filter(function(v){ return group[0].indexOf(v.kind) >= 0; });
      if (!vs.length) return;
      if (group[1]) { var tr0 = el("tr"), th = el("th", group[1]); th.colSpan = cols.length; tr0.appendChild(th); t.appendChild(tr0); }
      vs.forEach(function(v){
        var s = variantHere(e, v, chosen), m = mark(v.kind, s.advice), tr = el("tr");
        tr.className = m[1];
        tr.appendChild(el("td", m[0], "c"));
        var name = el("td"), b = el("b", v.name);
        name.appendChild(b);
        name.title = v.title;
        if (v.ref) name.appendChild(el("span", " (" + v.ref + ")"));
        tr.appendChild(name);
        var words = el("td"), lead = /^[^:(]*/.exec(s.words)[0].replace(/ $/, "");
        words.appendChild(el("b", lead));  // the answer in words; its counts after it
        words.appendChild(document.createTextNode(s.words.slice(lead.length)));
        if (detailed && s.instead && s.advice !== "confirmed") words.appendChild(el("div", "raised here: " + s.instead.slice(0, 300), "sig"));
        if (detailed && s.cells.length) words.appendChild(el("div", "cells here: " + s.cells.slice(0, 6).map(function(c){ return cellText(e, c); }).join("; ") + (s.cells.length > 6 ? "; … " + (s.cells.length - 6) + " more" : ""), "legend-words"));
        if (detailed && v.claim) words.appendChild(el("div", "the document claims " + v.claim[0] + ": over every measured version " + v.claim[1], "legend-words"));
        tr.appendChild(words);
        if (!detailed) {
          var per = sliceCells(e, s.cells);
          e.slices.forEach(function(_, si){ tr.appendChild(statusTd(per[si])); });
        }
        tr.appendChild(el("td", v.description, "d"));
        t.appendChild(tr);
      });
    });
    return t;
  }
  function command(e){ var p = el("p", "check it on your machine now: "); p.appendChild(el("span", "python -m harness run --python <your python> --entry " + e.id, "cmd")); return p; }
  function versionsText(torch, lightning){ return "torch " + (torch || "unknown") + " + lightning " + (lightning || "unknown"); }
  // the answer in a line: which workarounds work here, which do not, which dead ends to avoid
  function glance(variants){
    var groups = [["works", "workaround", "confirmed"], ["does not work", "workaround", "contradicted"], ["avoid (fails as documented)", "dead_end", "confirmed"], ["avoid (fails, not as documented)", "dead_end", "not as documented"], ["dead end that does not fail as documented", "dead_end", "contradicted"], ["not settled", null, "inconclusive"]];
    var p = el("p", null, "glance");
    groups.forEach(function(g){
      var names = variants.filter(function(x){ return x[0].kind !== "baseline" && (g[1] === null || x[0].kind === g[1]) && x[1].advice === g[2]; }).map(function(x){ return x[0].name; });
      if (!names.length) return;
      if (p.childNodes.length) p.appendChild(document.createTextNode(" · "));
      p.appendChild(el("b", g[0] + ": "));
      p.appendChild(document.createTextNode(names.join(", ")));
    });
    if (!p.childNodes.length) p.textContent = "No workaround or dead end was judged at these versions (see each for why).";
    return p;
  }
  // what the box answers, as data: explain's answer for one error and one set of versions
  // (the variants of the entries matched loaded first: f(answer), or f(null, the parts missing))
  function explainError(text, torch, lightning, f){
    var raised = parseError(text), matches = raised.length ? matchEntries(raised) : [];
    var entries = matches.map(function(m){ return m.e; });
    withVariants(entries, function(){
      if (missing(entries).length) { f(null, missing(entries)); return; }
      // the entries the paste is first; near misses after them (explain.py's PASTE_KINDS order)
      var ORDER = ["documented", "situation", "related", "near", "guess"];
      var ranked = matches.map(function(m, i){ return [ORDER.indexOf(pasteKind(m.e, m)), i, m]; })
        .sort(function(x, y){ return x[0] - y[0] || x[1] - y[1]; }).map(function(x){ return x[2]; });
      var guessed = ranked.length > 0 && ranked.every(function(m){ var k = pasteKind(m.e, m); return k === "guess" || k === "near"; });
      f({raised: raised, text: text, guessed: guessed, answers: ranked.map(function(m){
        var e = m.e, where = chooseEnvs(e, torch, lightning);
        return {m: m, e: e, where: where, variants: e.variants.filter(function(v){ return v.kind !== "control"; }).map(function(v){ return [v, variantHere(e, v, where.envs)]; })};
      })});
    });
  }
  function missingText(names){ return "The answers are missing: " + names.join(", ") + " could not be loaded."; }
  window.harnessExplain = function(text, torch, lightning, done){
    withData(function(){ explainError(text, torch, lightning, function(x, lost){
      if (!x) { done({missing: lost}); return; }
      done({raised: x.raised, guessed: x.guessed, answers: x.answers.map(function(a){
        return {entry: a.e.id, kind: pasteKind(a.e, a.m), how: a.m.how, what: a.m.what, variant: a.m.variant || "", score: a.m.score || 1,
          where: {exact: a.where.exact, said: a.where.said, envs: a.where.envs.map(function(x){ return x.id; })},
          variants: a.variants.map(function(p){ return {name: p[0].name, kind: p[0].kind, advice: p[1].advice, words: p[1].words, k: p[1].k, n: p[1].n, cells: p[1].cells.map(function(c){ return cellText(a.e, c); })}; })};
      })});
    }); });
  };
  function ask(){
    var text = document.getElementById("ask-error").value, torch = document.getElementById("lookup-torch").value.trim(), lightning = document.getElementById("lookup-lightning").value.trim();
    out.textContent = "";
    explainError(text, torch, lightning, function(x, lost){ answer(x, lost, torch, lightning); });
  }
  function answer(x, lost, torch, lightning){
    out.textContent = "";
    if (!x) { out.appendChild(el("p", missingText(lost))); return; }
    if (!x.raised.length) { out.appendChild(el("p", "Paste an error message or a traceback first, or look up every entry at these versions.")); return; }
    var remedy = namedRemedy(x.raised[0]);
    out.appendChild(el("p", headline(x, remedy), "glance"));
    out.appendChild(el("p", "your error: " + raisedText(x.raised[0]).slice(0, 500)));
    out.appendChild(el("p", "your versions: " + versionsText(torch, lightning)));
    if (!x.answers.length) return;
    if (x.guessed) {
      out.appendChild(el("p", "The closest entries by message look like it but are not it (guesses, not matches: their fixes are for their own errors):", "guess"));
      x.answers.forEach(function(a){
        var d = el("div", null, "answer");
        d.appendChild(heading(a.e, a.m.how === "guess" ? " guess: " + Math.round(a.m.score * 100) + "% alike" : " near miss"));
        if (a.m.how !== "guess") d.appendChild(el("p", said(a.e, a.m, "near"), "said near"));
        d.appendChild(el("p", "closest message: " + a.m.what.slice(0, 300), "sig"));
        d.appendChild(command(a.e));
        out.appendChild(d);
      });
      return;
    }
    out.appendChild(legend());
    x.answers.forEach(function(a, i){
      var e = a.e, m = a.m, d = el("div", null, "answer");
      d.appendChild(heading(e));
      // what the paste is for this entry (explain.py's paste_kind and _said)
      var kind = pasteKind(e, m), foreign = kind === "related" || kind === "near";
      if (i > 0) d.appendChild(el("p", said(e, m, kind), foreign ? "said near" : "said"));
      var occurs = (kind === "documented" || kind === "situation") ? e.occurs : "";
      if (occurs && (e.bottom || []).indexOf(occurs) < 0) d.appendChild(el("p", occurs));
      var devices = devicesSaid(e, x.text || "", occurs);
      if (devices) d.appendChild(el("p", devices));
      remedies(remedy, a.variants).forEach(function(t){ d.appendChild(el("p", "the remedy your message names, as measured: " + t)); });
      if (e.bottom && e.bottom.length) {
        var box = el("div", null, "bottom-line"); box.appendChild(el("strong", "In short, over every measured version:"));
        var ul = el("ul"); e.bottom.forEach(function(t){ ul.appendChild(el("li", t)); }); box.appendChild(ul); d.appendChild(box);
      }
      d.appendChild(el("p", "matched by " + howText(m) + ": " + m.what.slice(0, 300)));
      if (e.message) d.appendChild(el("p", "the runs on " + (m.how === "documented" ? "it" : "the documented message (" + e.signature[2] + ")") + ": " + e.message[0] + ", " + e.message[1], "legend-words"));
      d.appendChild(el("p", "for your versions: " + a.where.said, a.where.exact ? "said" : "said near"));
      d.appendChild(glance(a.variants));
      var forEntry = foreign ? " for the entry's error (" + e.signature[2].slice(0, 120) + "), not yours" : "";
      d.appendChild(variantTable(e, a.where.envs, [[["baseline"], "The error"], [["workaround"], "Workarounds" + forEntry], [["dead_end"], "Dead ends" + forEntry]], true));
      d.appendChild(command(e));
      out.appendChild(d);
    });
  }
  // what a paste is, in words: explain.py's paste_kind, _said, _devices_said, named_remedy
  function pasteKind(e, m){
    if (m.how === "guess") return "guess";
    if (m.how === "documented") return openPartsDiffer(e, m.raised) ? "near" : "documented";
    if (m.how === "seen" && shapeNumbersDiffer(m.raised.message, m.what)) return "near";
    return (e.baselines || []).indexOf(m.variant) >= 0 ? "situation" : "related";
  }
  // a near miss (explain.py's _open_parts_differ, _shape_numbers_differ): the same words,
  // other parts where they vary
  function openParts(pattern, message){
    var grouped = pattern.replace(/\.[*+]\??/g, function(g){ return "(" + g + ")"; });
    if (!pattern || grouped === pattern) return null;
    var re; try { re = new RegExp(grouped, "s"); } catch (err) { return null; }
    var hit = re.exec(message.slice(0, MATCH_CHARS));
    return hit ? hit.slice(1).map(function(g){ return shape(g || "").toLowerCase(); }).join("\u0000") : null;
  }
  function openPartsDiffer(e, r){
    if (!r) return false;
    var mine = openParts(e.signature[1], r.message);
    if (mine === null || !mine.replace(/\u0000/g, "")) return false;
    var theirs = e.seen.filter(function(s){ return (e.baselines || []).indexOf(e.names[s[0]]) >= 0; })
      .map(function(s){ return openParts(e.signature[1], s[2]); }).filter(function(x){ return x !== null; });
    return theirs.length > 0 && theirs.indexOf(mine) < 0;
  }
  var SHAPE_NUMBER = /(?<![\w.])\d+(?![\w.])/g;
  function shapeNumbersDiffer(pasted, seen){
    var cut = seen.indexOf(": "), text = cut >= 0 ? seen.slice(cut + 2) : seen;
    var mine = (pasted.match(SHAPE_NUMBER) || []).map(Number), theirs = (text.match(SHAPE_NUMBER) || []).map(Number);
    var small = mine.concat(theirs).every(function(n){ return n <= 64; });
    return mine.length > 0 && small && mine.length === theirs.length && mine.join(",") !== theirs.join(",");
  }
  function said(e, m, kind){
    if (kind === "documented") return "This is the error the entry “" + e.title + "” documents.";
    if (kind === "situation") return "This is the error of the entry “" + e.title + "”: its reproducer of the documented situation raises exactly this" + (m.runs ? " (in " + m.runs + " setup" + (m.runs !== 1 ? "s" : "") + ")" : "") + ", whatever words the document used.";
    if (kind === "near") return "Not this entry's error: it reads like “" + e.title + "”, but the parts of the message that vary differ from every run's (the runs raised “" + m.what.slice(0, 200) + "”): another cause, so the entry's fixes are not offered for it.";
    if (kind === "related") return "This is not the error the entry “" + e.title + "” documents: it is what its step " + m.variant + " runs into" + (m.runs ? ", raised in " + m.runs + " setup" + (m.runs !== 1 ? "s" : "") : "") + ".";
    return "Not this entry's error: it looks like “" + e.title + "”, but is not.";
  }
  function headline(x, remedy){
    var line;
    if (!x.answers.length) line = "No catalogued error matches this, and no entry is close.";
    else if (x.guessed) {
      line = "No catalogued error matches this. It looks like, but is not: " + x.answers.map(function(a){ return "“" + a.e.title + "”"; }).join("; ") + ".";
      var near = x.answers.filter(function(a){ return pasteKind(a.e, a.m) === "near"; })[0];
      if (near) line += " " + said(near.e, near.m, "near");
    }
    else line = said(x.answers[0].e, x.answers[0].m, pasteKind(x.answers[0].e, x.answers[0].m));
    if (remedy.sentence) line += " Your message names its own remedy: “" + remedy.sentence + "”.";
    return line;
  }
  var CUDA_PASTE = /\bcuda\b|cudnn|cublas|cusolver|nccl|device-side|\bnvidia\b|cuda:\d/i;
  function devicesSaid(e, text, occurs){
    var ran = (e.devices || [[], []])[0], missing = (e.devices || [[], []])[1], t = "";
    if (!occurs) t = (ran.length ? "Measured on " + ran.join(" and ") : "No device ran it") + (missing.length ? ", not on " + missing.join(" and ") : "") + ".";
    if (CUDA_PASTE.test(text) && ran.indexOf("CUDA") < 0) t += (t ? " " : "") + "Your error comes from a CUDA run: this answer comes from CPU runs, so it is a CPU answer.";
    return t;
  }
  var REMEDY_CUES = /\b(?:please use|use |set |setting|re-running|rerun|try |consider|pass |instead|to fix|you can|you should|did you mean)/i;
  var REMEDY = /`?([A-Za-z_][\w.]*)`?\s*(?:=|set to|to)\s*`?(True|False|None|[\w.'"-]+)`?/g;
  function namedRemedy(r){
    var none = {sentence: "", settings: []};
    if (!r) return none;
    var sentences = r.message.slice(0, 4000).split(/(?<=[.!?])\s+|\n/);
    for (var i = 0; i < sentences.length; i++) {
      var s = sentences[i];
      if (!REMEDY_CUES.test(s)) continue;
      var settings = [], m;
      REMEDY.lastIndex = 0;
      while ((m = REMEDY.exec(s)) !== null) {
        var v = m[2].replace(/`/g, "");
        if ((["True", "False", "None"].indexOf(m[2]) >= 0 || s.indexOf("`") >= 0) && settings.indexOf(m[1] + "=" + v) < 0) settings.push(m[1] + "=" + v);
      }
      return {sentence: s.split(/\s+/).join(" ").slice(0, 300), settings: settings};
    }
    return none;
  }
  function remedies(remedy, variants){
    var out = [];
    remedy.settings.forEach(function(setting){
      var parts = setting.split("="), rx = new RegExp("\\b" + parts[0].replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "\\s*=\\s*" + parts[1].replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "\\b");
      variants.forEach(function(pair){
        var v = pair[0];
        if (v.kind !== "control" && rx.test(v.description)) out.push(setting + ": " + v.description.slice(0, 220) + (v.claim ? " (" + v.claim[1] + ")" : ""));
      });
    });
    return out;
  }
  function lookup(){
    var torch = document.getElementById("lookup-torch").value.trim(), lightning = document.getElementById("lookup-lightning").value.trim();
    out.textContent = "";
    if (!torch) { out.appendChild(el("p", "Type your torch release (and lightning, if you use it) to look up every entry at those versions.")); return; }
    withVariants(D.entries, function(){ lookupAll(torch, lightning); });
  }
  function lookupAll(torch, lightning){
    out.textContent = "";
    var lost = missing(D.entries);
    if (lost.length) { out.appendChild(el("p", missingText(lost))); return; }
    var exact = [], near = [], none = [];
    D.entries.forEach(function(e){
      if (!e.envs.length) { none.push(e.id); return; }
      var where = chooseEnvs(e, torch, lightning);
      (where.exact ? exact : near).push([e, where]);
    });
    out.appendChild(el("p", exact.length + " entr" + (exact.length === 1 ? "y was" : "ies were") + " measured at " + versionsText(torch, lightning) + (near.length ? "; " + near.length + " answered from the nearest measured releases" : "") + (none.length ? "; never measured: " + none.join(", ") : "") + "."));
    out.appendChild(legend());
    exact.concat(near).forEach(function(x){
      var e = x[0], d = el("div", null, "answer");
      d.appendChild(heading(e));
      d.appendChild(el("p", x[1].said, x[1].exact ? "said" : "said near"));
      d.appendChild(variantTable(e, x[1].envs, [[["baseline", "workaround", "dead_end", "control"], ""]], false));
      out.appendChild(d);
    });
  }
  document.getElementById("ask-go").addEventListener("click", function(){ withData(ask); });
  document.getElementById("lookup-go").addEventListener("click", function(){ withData(lookup); });
  document.body.setAttribute("data-ready", "1");
})();
