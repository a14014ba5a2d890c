/* show_data widgets for the chat playground: chart (Chart.js, served from static), table, kpi, card, list,
   progress, flow and pivot. Every value is set as text (never HTML): rows come from the user's own data. */
(function () {
  "use strict";

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "\u2014";
    if (typeof v === "number") return v.toLocaleString();
    return String(v);
  }

  function list(v) { return Array.isArray(v) ? v : (v === undefined ? [] : [v]); }

  function chart(box, d, p) {
    const holder = el("div", "chart-holder");
    const canvas = document.createElement("canvas");
    holder.appendChild(canvas);
    box.appendChild(holder);
    if (typeof window.Chart !== "function") { box.appendChild(el("div", "note", "(chart library not loaded)")); return; }
    const ys = list(p.y);
    const labels = d.rows.map((r) => fmt(r[p.x]));
    const pie = p.type === "pie";
    const palette = ["#2f6f8f", "#e0823d", "#4c9a5b", "#b5485d", "#7d64a8", "#c9a227", "#3f8f8a", "#8a6b4f"];
    const datasets = ys.map((y, i) => ({
      label: y,
      data: d.rows.map((r) => Number(r[y]) || 0),
      backgroundColor: pie ? d.rows.map((_, j) => palette[j % palette.length]) : palette[i % palette.length],
      borderColor: pie ? "#fff" : palette[i % palette.length],
    }));
    holder.chart = new window.Chart(canvas, {
      type: p.type,
      data: {labels: labels, datasets: datasets},
      options: {animation: false, responsive: true, maintainAspectRatio: false,
                plugins: {legend: {display: pie || ys.length > 1}}},
    });
  }

  function table(box, d, p) {
    const cols = list(p.columns).length ? list(p.columns) : d.columns;
    const t = el("table", "widget-table");
    const head = t.createTHead().insertRow();
    cols.forEach((c) => head.appendChild(el("th", "", c)));
    const body = t.createTBody();
    d.rows.forEach((r) => { const tr = body.insertRow(); cols.forEach((c) => tr.appendChild(el("td", "", fmt(r[c])))); });
    box.appendChild(t);
  }

  function kpi(box, d, p) {
    const row = d.rows[0] || {};
    const k = el("div", "widget-kpi");
    k.appendChild(el("div", "kpi-value", fmt(row[p.value]) + (p.unit ? " " + p.unit : "")));
    k.appendChild(el("div", "kpi-label", p.label || p.value));
    box.appendChild(k);
  }

  function card(box, d, p) {
    const fields = list(p.fields).length ? list(p.fields) : d.columns.filter((c) => c !== p.title);
    const grid = el("div", "widget-cards");
    d.rows.forEach((r) => {
      const c = el("div", "widget-card-item");
      c.appendChild(el("div", "card-title", fmt(r[p.title])));
      const dl = el("dl");
      fields.forEach((f) => { dl.appendChild(el("dt", "", f)); dl.appendChild(el("dd", "", fmt(r[f]))); });
      c.appendChild(dl);
      grid.appendChild(c);
    });
    box.appendChild(grid);
  }

  function itemList(box, d, p) {
    const ul = el("ul", "widget-list");
    d.rows.forEach((r) => {
      const li = el("li");
      li.appendChild(el("span", "primary", fmt(r[p.primary])));
      if (p.secondary) li.appendChild(el("span", "secondary", " \u00b7 " + fmt(r[p.secondary])));
      ul.appendChild(li);
    });
    box.appendChild(ul);
  }

  function progress(box, d, p) {
    d.rows.forEach((r) => {
      const max = typeof p.max === "number" ? p.max : Number(r[p.max]) || 0;
      const value = Number(r[p.value]) || 0;
      const line = el("div", "widget-progress");
      line.appendChild(el("span", "progress-label", p.label ? fmt(r[p.label]) : p.value));
      const bar = el("progress");
      bar.max = max || 1;
      bar.value = Math.min(value, max || 1);
      line.appendChild(bar);
      line.appendChild(el("span", "progress-value", fmt(value) + " / " + fmt(max)));
      box.appendChild(line);
    });
  }

  function flow(box, d, p) {
    const totals = new Map();
    d.rows.forEach((r) => {
      const k = String(r[p.step]);
      totals.set(k, (totals.get(k) || 0) + (p.value ? Number(r[p.value]) || 0 : 1));
    });
    const stages = list(p.stages).length ? list(p.stages) : Array.from(totals.keys());
    const row = el("div", "widget-flow");
    stages.forEach((s, i) => {
      if (i) row.appendChild(el("span", "flow-arrow", "\u2192"));
      const stage = el("div", "flow-stage");
      stage.appendChild(el("div", "flow-name", s));
      stage.appendChild(el("div", "flow-count", fmt(totals.get(String(s)) || 0)));
      row.appendChild(stage);
    });
    box.appendChild(row);
  }

  function pivot(box, d, p) {
    const rowKeys = [], colKeys = [], cells = new Map();
    d.rows.forEach((r) => {
      const a = fmt(r[p.rows]), b = fmt(r[p.columns]);
      if (!rowKeys.includes(a)) rowKeys.push(a);
      if (!colKeys.includes(b)) colKeys.push(b);
      const add = p.agg === "count" || !p.value ? 1 : Number(r[p.value]) || 0;
      cells.set(a + "\u0000" + b, (cells.get(a + "\u0000" + b) || 0) + add);
    });
    const t = el("table", "widget-table widget-pivot");
    const head = t.createTHead().insertRow();
    head.appendChild(el("th", "", p.rows + " \\ " + p.columns));
    colKeys.forEach((c) => head.appendChild(el("th", "", c)));
    const body = t.createTBody();
    rowKeys.forEach((a) => {
      const tr = body.insertRow();
      tr.appendChild(el("th", "", a));
      colKeys.forEach((b) => tr.appendChild(el("td", "", fmt(cells.get(a + "\u0000" + b) || 0))));
    });
    box.appendChild(t);
  }

  const RENDER = {chart: chart, table: table, kpi: kpi, card: card, list: itemList, progress: progress, flow: flow,
                  pivot: pivot};

  // display: {widget: {type, props}, columns, rows, count, more}; drawn into `parent` (in the page already,
  // so the chart can measure itself).
  function render(display, parent) {
    const widget = display.widget || {};
    const props = widget.props || {};
    const box = el("div", "widget widget-" + widget.type);
    box.dataset.widget = widget.type || "";
    parent.appendChild(box);
    // A card's `title` names the column heading each card, not a title for the widget.
    if (props.title && widget.type !== "card") box.appendChild(el("div", "widget-title", props.title));
    const draw = RENDER[widget.type];
    if (!draw) { box.appendChild(el("div", "note", "(unknown widget " + widget.type + ")")); return box; }
    draw(box, {columns: display.columns || [], rows: display.rows || []}, props);
    if (display.more) box.appendChild(el("div", "note", "showing " + display.rows.length + " of " + display.count + " rows"));
    return box;
  }

  window.ToolhubWidgets = {render: render};
})();
