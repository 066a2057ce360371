// The backlog chart: samples the console took itself (each refresh of the metrics), kept for the last
// WINDOW_MS in this tab, drawn as one SVG line per queue. No charting library: a few polylines do.

import { fmt, h, uid } from "./ui.js";

export const WINDOW_MS = 10 * 60 * 1000;
export const MAX_SERIES = 6; // colours and dash patterns in console.css (.s0 ... .s5)
const W = 720;
const H = 200;
const PAD = { left: 52, right: 12, top: 12, bottom: 24 };
const samples = []; // [{t, values: {queue: backlog}}], oldest first, shared by every page of this tab

export function record(values, t = Date.now()) {
  samples.push({ t, values });
  while (samples.length && samples[0].t < t - WINDOW_MS) samples.shift();
}

const niceMax = (value) => {
  if (value <= 4) return 4;
  const step = 10 ** Math.floor(Math.log10(value));
  return Math.ceil(value / step) * step;
};

// `names`: the queues to draw (the first MAX_SERIES of them).
export function backlogChart(names, heading) {
  const now = Date.now();
  const shown = names.slice(0, MAX_SERIES);
  const peak = Math.max(0, ...samples.flatMap((s) => shown.map((n) => s.values[n] ?? 0)));
  const top = niceMax(peak);
  const x = (t) => PAD.left + ((t - (now - WINDOW_MS)) / WINDOW_MS) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  const titleId = uid("chart-title");
  const descId = uid("chart-desc");
  const latest = samples.length ? samples[samples.length - 1].values : {};
  const summary = shown.length
    ? shown.map((n) => `${n}: ${fmt.count(latest[n] ?? 0)}`).join(", ")
    : "no queues";
  const grid = [0, top / 2, top].map((v) => [
    h("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
    h("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, fmt.count(v)),
  ]);
  const ticks = [10, 5, 0].map((minutes) =>
    h("text", { x: x(now - minutes * 60000), y: H - 6, "text-anchor": "middle" }, minutes ? `−${minutes} min` : "now"),
  );
  const lines = shown.map((name, i) => {
    const points = samples.filter((s) => name in s.values).map((s) => `${x(s.t).toFixed(1)},${y(s.values[name]).toFixed(1)}`);
    return h("polyline", {
      class: `s${i}`,
      points: points.join(" "),
      dataset: { queue: name, latest: latest[name] ?? 0, samples: points.length },
    });
  });
  const svg = h(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${titleId} ${descId}` },
    h("title", { id: titleId }, heading),
    h("desc", { id: descId }, `Latest backlog: ${summary}. ${samples.length} samples over the last ${WINDOW_MS / 60000} minutes.`),
    grid,
    ticks,
    lines,
  );
  const legend = h(
    "ul",
    { class: "legend", "aria-hidden": "true" },
    shown.map((name, i) => h("li", { class: `s${i}` }, h("span", { class: "swatch" }), name)),
  );
  const more = names.length > shown.length ? ` The ${shown.length} largest of ${names.length} queues are drawn.` : "";
  return h(
    "figure",
    { class: "backlog" },
    svg,
    legend,
    h("figcaption", {}, `${heading}: the console samples the metrics at each refresh.${more}`),
  );
}
