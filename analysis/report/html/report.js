// The shp-ray HTML report: the policy table (sortable), the Plotly charts, and the trajectory browser.
// Trajectories are parsed from their JSON block only when one of them is chosen (PAGE per block).
(function () {
  "use strict";
  const timings = { script_ms: performance.now() };  // when this script started: the page parsed up to here
  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs, ...kids) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const kid of kids) node.append(kid);
    return node;
  };
  const data = JSON.parse(document.getElementById("report-data").textContent);
  timings.data_ms = performance.now();
  const fmt = (x, nd) => (x === null || x === undefined ? "–" : Number(x).toFixed(nd));
  let splitFilter = "";

  // ---- header -------------------------------------------------------------------------------------------
  function header() {
    const head = $("#head");
    head.append(el("h1", { text: "shp-ray replay report" }));
    if (data.synthetic) {
      head.append(el("p", { class: "synthetic", text: "SYNTHETIC DATA: generated numbers to exercise the " +
        "pipeline; they say nothing about any model or stopping policy." }));
    }
    const ul = el("ul");
    ul.append(el("li", { text: data.title }));
    ul.append(el("li", { text: "Store: " + data.store }));
    ul.append(el("li", { text: "Judge: " + data.judge + " · non-inferiority margin δ = " + data.delta }));
    ul.append(el("li", { text: "Primary outcome: " + (data.primary === "is" ? "IS" : data.primary) +
      (data.scores.length ? " · scores at each stop: " + data.scores.join(", ") : "") }));
    for (const line of data.left_out) ul.append(el("li", { class: "left-out", text: line }));
    ul.append(el("li", { text: "Splits (never pooled): " +
      data.splits.map((s) => s.name + " (N = " + s.n + ")").join(", ") }));
    for (const g of data.generations) {
      ul.append(el("li", { text: "Generation " + g.gen_id + ": model " + g.model + " via " + g.provider +
        ", T = " + g.max_rounds }));
    }
    head.append(ul);
    const sel = $("#split-filter");
    for (const s of data.splits) sel.append(el("option", { value: s.name, text: s.name }));
    sel.addEventListener("change", () => { splitFilter = sel.value; renderTable(); filterList(); });
  }

  // ---- policy table -------------------------------------------------------------------------------------
  let sortCol = -1, sortDir = 1;
  function renderTable() {
    const thead = $("#policy-table thead"), tbody = $("#policy-table tbody");
    if (!thead.firstChild) {
      const tr = el("tr");
      data.columns.forEach(([key, head], i) => {
        const th = el("th", { text: head, "data-key": key });
        th.addEventListener("click", () => { sortDir = sortCol === i ? -sortDir : 1; sortCol = i; renderTable(); });
        tr.append(th);
      });
      thead.append(tr);
    }
    thead.querySelectorAll("th").forEach((th, i) => {
      th.className = i === sortCol ? (sortDir > 0 ? "asc" : "desc") : "";
    });
    let rows = data.rows.filter((r) => !splitFilter || r[0][0] === splitFilter);
    if (sortCol >= 0) {
      rows = rows.slice().sort((a, b) => {
        const x = a[sortCol][0], y = b[sortCol][0];
        if (x === null && y === null) return 0;
        if (x === null) return 1;  // a missing value sorts last either way
        if (y === null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
      });
    }
    tbody.replaceChildren(...rows.map((r) => {
      const tr = el("tr");
      r.forEach((c, i) => {
        const td = el("td", { text: c[1] });
        if (data.columns[i][2]) td.className = "text";
        if (c.length > 2) td.classList.add("v-" + c[2]);
        tr.append(td);
      });
      return tr;
    }));
  }
  function legend() {
    const p = $("#legend");
    if (!data.columns.some(([key]) => key === "verdict")) return;  // no IS: no verdict to colour
    p.append("Verdict on IS (paired TOST):");
    for (const [kind, [label, colour]] of Object.entries(data.verdicts)) {
      const sw = el("span", { class: "swatch" });
      sw.style.background = colour;
      p.append(sw, label + (kind === "powered" ? " (the power to say so)" : ""));
    }
  }

  // ---- charts -------------------------------------------------------------------------------------------
  // Plotly's own script (inlined, not run with the page: it is most of the page's load) runs once the table and the
  // browser are on screen, then draws the charts.
  function loadPlotly() {
    return new Promise((resolve) => requestAnimationFrame(() => setTimeout(() => {
      const s = document.createElement("script");
      s.textContent = document.getElementById("plotly-js").textContent;
      document.head.append(s);  // an inline script: it runs here
      resolve();
    })));
  }
  function charts() {
    const box = $("#figures"), done = [];
    const config = { responsive: true, displaylogo: false };
    for (const f of data.figures) {
      for (const which of ["pareto", "saved"]) {
        if (!f[which]) continue;  // no values of the outcome in this split (the header says so)
        const div = el("div", { class: "figure", "data-split": f.split, "data-chart": which });
        box.append(div);
        done.push(Plotly.newPlot(div, f[which].data, f[which].layout, config));
      }
    }
    return Promise.all(done);
  }

  // ---- trajectory browser -------------------------------------------------------------------------------
  const LIST_PAGE = 50;
  const pages = new Map();  // block number -> promise of its trajectories (inflated and parsed on first use)
  let shown = [], listPage = 0, chosen = -1;
  function inflate(b64) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function trajectory(i) {
    const block = Math.floor(i / data.page_size);
    if (!pages.has(block)) pages.set(block, inflate(document.getElementById("tp-" + block).textContent.trim()));
    return pages.get(block).then((page) => page[i % data.page_size]);
  }
  function filterList() {
    const q = $("#traj-search").value.trim().toLowerCase();
    shown = [];
    data.index.forEach((e, i) => {
      if (splitFilter && e[0] !== splitFilter) return;
      if (q && !(e[2].toLowerCase().includes(q) || e[3].toLowerCase().includes(q))) return;
      shown.push(i);
    });
    listPage = 0;
    renderList();
  }
  function renderList() {
    const pagesN = Math.max(1, Math.ceil(shown.length / LIST_PAGE));
    listPage = Math.min(listPage, pagesN - 1);
    $("#traj-count").textContent = shown.length + " of " + data.index.length + " trajectories. " + data.held_note;
    $("#page-no").textContent = "page " + (listPage + 1) + " / " + pagesN;
    const items = shown.slice(listPage * LIST_PAGE, (listPage + 1) * LIST_PAGE).map((i) => {
      const e = data.index[i];
      const li = el("li", { "data-index": String(i) }, el("span", { class: "sid", text: e[2] }),
        el("span", { class: "meta", text: " · " + e[0] + " · " + e[1] + " · T = " + e[4] }),
        el("div", { text: e[3] }));
      if (i === chosen) li.classList.add("chosen");
      li.addEventListener("click", () => show(i));
      return li;
    });
    $("#traj-list").replaceChildren(...items);
  }

  function words(text) { return (text || "").split(/(\s+)/).filter((w) => w.length > 0); }
  // Word diff of b against a (LCS); over ~2.5M cells it shows b as it is (a long draft: no diff, said so).
  function diff(a, b) {
    const x = words(a), y = words(b), n = x.length, m = y.length;
    if (n * m > 2500000) return [el("em", { text: "(too long to diff) " }), b];
    const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        dp[i][j] = x[i] === y[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    const push = (tag, w) => {
      const last = out[out.length - 1];
      if (last && last.tag === tag) last.text += w; else out.push({ tag, text: w });
    };
    while (i < n && j < m) {
      if (x[i] === y[j]) { push("", x[i]); i++; j++; }
      else if (dp[i + 1][j] >= dp[i][j + 1]) { push("del", x[i]); i++; }
      else { push("ins", y[j]); j++; }
    }
    while (i < n) push("del", x[i++]);
    while (j < m) push("ins", y[j++]);
    return out.map((p) => (p.tag ? el(p.tag, { text: p.text }) : document.createTextNode(p.text)));
  }

  // where each metric sits in a round's array: [draft, critique, d_t, IS, 4 judge metrics, EM, F1, approved, scores]
  const METRIC_AT = { d_t: 2, IS: 3, faithfulness: 4, answer_relevancy: 5, context_precision: 6, context_recall: 7,
    EM: 8, F1: 9 };
  function stopGrid(t, depth) {
    const table = el("table", { class: "stops" });
    const head = el("tr", {}, el("th", { text: "policy stops at round →" }));
    for (let r = 1; r <= depth; r++) head.append(el("th", { text: String(r) }));
    table.append(head);
    const stops = t.stops.slice().sort((a, b) => a[1] - b[1] || (data.policies[a[0]] < data.policies[b[0]] ? -1 : 1));
    for (const [p, round, why] of stops) {
      const tr = el("tr", { "data-policy": data.policies[p] }, el("td", { class: "text", text: data.policies[p] }));
      for (let r = 1; r <= depth; r++) {
        tr.append(r === round
          ? el("td", { class: "stop-marker", title: "stops: " + data.reasons[why], "data-round": String(r),
            text: "● " + data.reasons[why] })
          : el("td"));
      }
      table.append(tr);
    }
    return table;
  }

  async function show(i) {
    chosen = i;
    const e = data.index[i], t = await trajectory(i), depth = t.rounds.length;
    if (chosen !== i) return;  // another trajectory was chosen while this one's block was inflating
    const box = $("#trajectory");
    // the question and the gold answer keep their whitespace (a task's code, a docstring's indentation)
    const parts = [el("h3", { text: e[2] + " · split " + e[0] + " · generation " + e[1] + " · T = " + depth }),
      el("div", { class: "label", text: "Question" }), el("pre", { class: "code question", text: t.q || "–" }),
      el("div", { class: "label", text: "Gold answer" }), el("pre", { class: "code gold", text: t.gold || "–" }),
      stopGrid(t, depth)];
    const stopsAt = new Map();
    for (const [p, round, why] of t.stops) {
      if (!stopsAt.has(round)) stopsAt.set(round, []);
      stopsAt.get(round).push([data.policies[p], data.reasons[why]]);
    }
    t.rounds.forEach((r, k) => {
      const round = k + 1;
      const card = el("div", { class: "round-card", "data-round": String(round) });
      card.append(el("h3", { text: "Round " + round + (r[10] ? " · Critic approved" : "") }));
      const scores = el("div", { class: "scores" });
      for (const name of data.metrics) {
        const j = METRIC_AT[name];
        scores.append(el("span", { text: name + " " + fmt(r[j], j < 8 ? 4 : 2) }));
      }
      data.scores.forEach((name, j) => {
        const v = (r[11] || [])[j];
        const passFail = data.pass_fail.includes(name);
        const text = v === null || v === undefined ? "–" : passFail ? (v === 1 ? "✓ pass" : "✗ fail") : fmt(v, 3);
        const cls = "score" + (passFail && v !== null && v !== undefined ? (v === 1 ? " pass" : " fail") : "");
        scores.append(el("span", { class: cls, "data-score": name, text: name + " " + text }));
      });
      card.append(scores);
      const here = stopsAt.get(round) || [];
      if (here.length) {
        const line = el("div", { class: "stopped-here" }, "stops here: ");
        for (const [p, why] of here) line.append(el("span", { class: "badge", title: why, text: p }));
        card.append(line);
      }
      card.append(el("div", { class: "draft" }, ...(k === 0 ? [r[0] || ""] : diff(t.rounds[k - 1][0], r[0]))));
      if (r[1]) card.append(el("div", { class: "critique" }, el("strong", { text: "Critique: " }), r[1]));
      parts.push(card);
    });
    box.replaceChildren(...parts);
    renderList();
    if (decodeURIComponent(location.hash.slice(1)) !== e[2]) {
      history.replaceState(null, "", "#" + encodeURIComponent(e[2]));  // a link to this trajectory
    }
    document.dispatchEvent(new CustomEvent("trajectory-shown", { detail: { index: i, rounds: depth } }));
  }

  header();
  renderTable();
  legend();
  $("#traj-search").addEventListener("input", filterList);
  $("#prev").addEventListener("click", () => { listPage = Math.max(0, listPage - 1); renderList(); });
  $("#next").addEventListener("click", () => { listPage += 1; renderList(); });
  filterList();
  // index.html#<scenario_id>: open that trajectory (the first of that id, by split and generation)
  function follow() {
    const id = decodeURIComponent(location.hash.slice(1));
    const i = id ? data.index.findIndex((e) => e[2] === id) : -1;
    if (i >= 0 && i !== chosen) {
      show(i).then(() => $("#browser").scrollIntoView());
    }
  }
  window.addEventListener("hashchange", follow);
  follow();
  timings.table_ms = performance.now();  // the table and the trajectory browser work from here on
  window.shpReport = { show, ready: false, trajectories: data.index.length, timings };
  loadPlotly().then(() => { timings.plotly_ms = performance.now(); return charts(); }).then(() => {
    timings.charts_ms = performance.now();
    window.shpReport.ready = true;
    document.dispatchEvent(new Event("report-ready"));
  });
})();
