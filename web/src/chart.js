// One chart of one metric family: per series, its bucket means as a line,
// the band between the bucket's minimum and maximum, and every extreme that
// leaves its line (extremes.js) as a whisker from the line to a dot in the
// line's colour, so a one-sample spike or dip stays visible at any zoom and
// with any number of lines. With many lines (8 GPUs) the bands would blur
// into one mass: they are drawn only for the highlighted line (hover or
// click its legend entry, or choose one GPU) and the other lines and their
// whiskers fade; the whiskers are drawn for every line. Holds the buckets it
// was given by time, so follow updates (changed buckets only) merge into
// them. Dragging across the chart asks the owner to zoom.
//
// Uses uPlot (window.uPlot, served by metricsd from npm's package).

import { departures, typicalSpreads } from './extremes.js';
import { seriesLabel } from './families.js';
import { byteTickSteps, formatDuration, formatRange, formatResolution, formatTicks, formatTime,
  formatTimeTicks, formatValue } from './format.js';

// A colour per GPU index (and per line of other charts), so GPU 3 keeps its
// colour in every chart and when it is the only one selected.
export const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
  '#8c564b', '#e377c2', '#17becf'];
const AGENT_COLOR = '#5a6275';
const HEIGHT = 200;
export const VALUE_AXIS_PX = 84;  // the y axis's width, left of the plot
const TICK_SPACE_PX = 90;  // "21:57:49" and a gap: labels never overlap
const KNOWN_UNITS = ['percent', 'bytes', 'bytes/s', 'watts', 'hertz', 'celsius'];
const MANY_LINES = 3;  // beyond this, bands only for the highlighted line
const DOT_RADIUS_PX = 2.5;  // the dot at an extreme that leaves its line
const WHISKER_PX = 1.5;

function withAlpha(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function seriesKey(s) {
  return `${s.trialId || ''}\u0000${s.agentId}\u0000${s.gpuUuid}\u0000${s.name}`;
}

// The y range: percentages keep 0–100 %; anything else fits its data with
// a margin (a slowly shrinking 1.35 TiB is a slope, not a flat line).
export function valueRange(min, max, percent) {
  if (min === null || max === null) return [0, percent ? 100 : 1];
  if (percent) return [0, Math.max(100, max)];
  const pad = max > min ? (max - min) * 0.08 : Math.abs(max) * 0.05 || 1;
  const low = min >= 0 ? Math.max(0, min - pad) : min - pad;
  return [low, max + pad];
}

// A share family's lines: each `part` line as a percentage of its GPU's
// `whole` line, bucket by bucket (where a bucket lacks the whole, its
// largest value: a total does not change). Min, max and mean are divided by
// the same whole, so the band and every extreme stay exact.
export function shareLines(lines, share) {
  const wholes = new Map(lines.filter((l) => l.series.name === share.whole)
    .map((l) => [l.series.gpuUuid, l]));
  const shared = [];
  for (const line of lines.filter((l) => l.series.name === share.part)) {
    const whole = wholes.get(line.series.gpuUuid);
    if (!whole) continue;
    let largest = 0;
    for (const b of whole.buckets.values()) largest = Math.max(largest, b.max || 0);
    const buckets = new Map();
    for (const [t, b] of line.buckets) {
      const w = whole.buckets.get(t);
      const total = w && w.max > 0 ? w.max : largest;
      if (!(total > 0)) continue;
      const pct = (v) => (v === null ? null : (100 * v) / total);
      buckets.set(t, { min: pct(b.min), max: pct(b.max), mean: pct(b.mean) });
    }
    shared.push({ series: { ...line.series, unit: 'percent' }, buckets });
  }
  return shared;
}

// The levels of a family's reference lines (power limits): each line's
// largest value in the window, distinct, lowest first.
function referenceLevels(lines) {
  const levels = new Set();
  for (const line of lines) {
    let top = null;
    for (const b of line.buckets.values()) {
      if (b.max !== null) top = top === null ? b.max : Math.max(top, b.max);
    }
    if (top !== null) levels.add(top);
  }
  return [...levels].sort((a, b) => a - b);
}

export class FamilyChart {
  // `element` is emptied and filled; onZoom(startMs, endMs) on a drag;
  // `gpus` maps a GPU UUID to its index; onHighlight(gpuUuid or null) when
  // a GPU's legend entry is hovered or clicked (the owner highlights it in
  // every chart with setHighlight). Summaries (summary_view.js): lineLabel
  // (series -> {text, title}) names the lines, onPick(series) is called on
  // a click of a line's legend entry instead of highlighting it, and
  // relativeTime puts times since the run's start on the x axis.
  constructor(element, family, { onZoom, syncKey, gpus = new Map(), onHighlight = () => {},
    lineLabel = null, onPick = null, relativeTime = false }) {
    this.family = family;
    this.lineLabel = lineLabel;
    this.onPick = onPick;
    this.relativeTime = relativeTime;
    this.onZoom = onZoom;
    this.syncKey = syncKey;
    this.gpus = gpus;
    this.onHighlight = onHighlight;
    this.highlight = null;  // series key of the highlighted line
    this.lines = new Map();  // series key -> {series, buckets: Map(ms -> {min,max,mean})}
    this.shown = [];  // the plotted lines, in legend order
    this.typical = [];  // per plotted line, its buckets' typical spreads (extremes.js)
    this.lastSampleMs = null;  // the newest sample charted
    this.rawExpired = false;  // the answer's raw points were removed by retention
    this.resolutionMs = null;
    this.unit = '';
    this.references = [];  // levels of the reference lines (power limit)
    this.plot = null;
    element.classList.add('chart');
    element.dataset.family = family.id;
    element.innerHTML = '';
    const head = document.createElement('div');
    head.className = 'chart-head';
    this.titleElement = document.createElement('h2');
    this.titleElement.textContent = family.title;
    if (family.names.length === 1) this.titleElement.title = family.names[0];
    this.detailElement = document.createElement('span');
    this.detailElement.className = 'chart-detail';
    head.append(this.titleElement, this.detailElement);
    this.body = document.createElement('div');
    this.body.className = 'chart-body';
    element.append(head, this.body);
    this.element = element;
    this.showStatus('Loading…');
  }

  showStatus(text, isError = false) {
    this.destroyPlot();
    this.body.innerHTML = '';
    const p = document.createElement('p');
    p.className = isError ? 'status error' : 'status';
    p.textContent = text;
    this.body.append(p);
    this.element.dataset.state = isError ? 'error' : 'loading';
  }

  // Replaces the chart's data with a QuerySeries answer's series;
  // rawExpired: the answer's rawExpired (raw points were removed by
  // retention, so these are the finest stored buckets).
  setData(seriesBuckets, rawExpired = false) {
    this.rawExpired = rawExpired;
    this.lines.clear();
    this.resolutionMs = null;
    this.lastSampleMs = null;
    this.merge(seriesBuckets);
  }

  // Merges changed buckets (a follow message's series) into the chart. A
  // series has its buckets' starts (bucketStartMs), or a grid of them from
  // firstBucketMs, resolutionMs apart, where null marks a bucket with
  // nothing (left as it is).
  merge(seriesBuckets) {
    for (const sb of seriesBuckets) {
      const key = seriesKey(sb.series);
      let line = this.lines.get(key);
      if (!line) {
        line = { series: sb.series, buckets: new Map() };
        this.lines.set(key, line);
      }
      this.resolutionMs = Number(sb.resolutionMs);
      this.unit = sb.series.unit;
      const startOf = sb.bucketStartMs ? (i) => sb.bucketStartMs[i]
        : (i) => sb.firstBucketMs + i * this.resolutionMs;
      for (let i = 0; i < sb.mean.length; i++) {
        if (sb.mean[i] === null && sb.min[i] === null) continue;
        line.buckets.set(startOf(i), { min: sb.min[i], max: sb.max[i], mean: sb.mean[i] });
      }
      if (sb.lastSampleMs !== undefined) {
        const last = Number(sb.lastSampleMs);
        this.lastSampleMs = this.lastSampleMs === null ? last : Math.max(this.lastSampleMs, last);
      }
    }
    this.render();
  }

  gpuIndex(series) {
    return series.gpuUuid && this.gpus.has(series.gpuUuid) ? this.gpus.get(series.gpuUuid) : null;
  }

  colorOf(line, position) {
    if (!this.family.perGpu) return COLORS[position % COLORS.length];
    const index = this.gpuIndex(line.series);
    return index === null ? AGENT_COLOR : COLORS[index % COLORS.length];
  }

  render() {
    const family = this.family;
    let source = [...this.lines.values()].filter((l) => l.buckets.size > 0);
    if (family.reference) {
      this.references = referenceLevels(source.filter((l) => l.series.name === family.reference));
      source = source.filter((l) => l.series.name !== family.reference);
    }
    if (family.share) {
      source = shareLines(source, family.share);
      this.unit = 'percent';
    }
    this.element.dataset.references = this.references
      .map((v) => formatValue(v, this.unit)).join(', ');
    const lines = source
      .map((l) => ({ ...l, key: seriesKey(l.series),
        label: this.lineLabel ? this.lineLabel(l.series) : seriesLabel(this.family, l.series, this.gpus) }))
      .sort((a, b) => (this.gpuIndex(a.series) ?? -1) - (this.gpuIndex(b.series) ?? -1) ||
        a.label.text.localeCompare(b.label.text, 'en', { numeric: true }));
    let points = 0;
    const times = new Set();
    for (const line of lines) {
      for (const t of line.buckets.keys()) times.add(t);
      points += line.buckets.size;
    }
    this.element.dataset.points = String(points);
    if (points === 0) {
      this.showStatus('No data in this window.');
      this.element.dataset.state = 'empty';
      return;
    }
    this.detailElement.textContent = formatResolution(this.resolutionMs, this.rawExpired);
    this.element.dataset.resolutionMs = String(this.resolutionMs);
    this.element.dataset.rawExpired = String(this.rawExpired === true);
    const xs = [...times].sort((a, b) => a - b);
    const data = [xs.map((t) => t / 1000)];
    for (const line of lines) {
      const columns = { mean: [], max: [], min: [] };
      for (const t of xs) {
        const b = line.buckets.get(t);
        for (const k of ['mean', 'max', 'min']) columns[k].push(b ? b[k] : null);
      }
      data.push(columns.mean, columns.max, columns.min);
    }
    this.typical = lines.map((_, i) => typicalSpreads(data[1 + 3 * i], data[3 + 3 * i],
      data[2 + 3 * i]));
    const keys = lines.map((l) => l.key).join('|');
    if (this.plot && this.plotKeys === keys) {
      this.plot.setData(data);
    } else {
      this.shown = lines;
      this.createPlot(lines, data);
      this.plotKeys = keys;
    }
    this.element.dataset.state = 'ready';
  }

  // Highlights the line of this GPU (or series key); null for none.
  setHighlight(gpuUuidOrKey) {
    const line = this.shown.find((l) => l.key === gpuUuidOrKey ||
      (gpuUuidOrKey && l.series.gpuUuid === gpuUuidOrKey));
    const key = line ? line.key : null;
    if (key === this.highlight) return;
    this.highlight = key;
    this.element.dataset.highlight = line ? line.label.text : '';
    if (this.plot) {
      this.plot.root.querySelectorAll('.u-legend .u-series').forEach((row, i) => {
        if (i === 0 || (i - 1) % 3 !== 0) return;
        row.classList.toggle('highlighted', this.shown[(i - 1) / 3].key === key);
      });
      this.plot.redraw(false);
    }
  }

  // Whether line `i`'s band and min/max edges are drawn: every line's in a
  // chart of a few lines, else (8 GPUs) only the highlighted one's.
  bandShown(i) {
    return this.shown.length <= MANY_LINES || this.shown[i].key === this.highlight;
  }

  faded(i) {
    return this.highlight !== null && this.shown[i].key !== this.highlight;
  }

  createPlot(lines, data) {
    this.destroyPlot();
    this.body.innerHTML = '';
    const unit = this.unit;
    const format = (v) => formatValue(v, unit);
    const when = (ms) => (this.relativeTime ? `+${formatDuration(ms)}` : formatTime(ms));
    const series = [{ value: (u, v) => (v === null ? '–' : when(v * 1000)) }];
    const many = lines.length > MANY_LINES;
    const range = (low, high) => formatRange(low, high, unit);
    const bands = [];
    lines.forEach((line, i) => {
      const color = this.colorOf(line, i);
      const mean = series.length;
      const edge = () => (this.bandShown(i) ? withAlpha(color, 0.5) : 'transparent');
      series.push({
        label: line.label.text,
        stroke: () => (this.faded(i) ? withAlpha(color, 0.25) : color),
        width: 1.5,
        spanGaps: true,
        // The bucket's mean, then its range when it has one (a raw point
        // or a bucket of equal values is one value), with any number of
        // lines: the hover tells which GPU dipped.
        value: (u, v, s, idx) => {
          if (idx === null || v === null) return '–';
          const low = u.data[mean + 2][idx];
          const high = u.data[mean + 1][idx];
          return low === high ? format(v) : `${format(v)} (${range(low, high)})`;
        },
      });
      series.push({ label: 'max', stroke: edge, width: 1, spanGaps: true, value: (u, v) => format(v) });
      series.push({ label: 'min', stroke: edge, width: 1, spanGaps: true, value: (u, v) => format(v) });
      bands.push({ series: [mean + 1, mean + 2],
        fill: () => (this.bandShown(i) ? withAlpha(color, 0.18) : 'transparent') });
    });
    const percent = unit === 'percent';
    const options = {
      width: Math.max(300, this.body.clientWidth || 600),
      height: HEIGHT,
      series,
      bands,
      scales: {
        x: {
          time: !this.relativeTime,
          // A lone point (a fresh trial's first seconds, an agent that died
          // early): a minute either side. uPlot widens it to 1000 days (its
          // one day, taken as milliseconds) before asking here.
          range: (u, min, max) => {
            const xs = u.data[0];
            return xs.length === 1 ? [xs[0] - 60, xs[0] + 60] : [min, max];
          },
        },
        // Reference levels stay in view.
        y: { range: (u, min, max) => valueRange(
          min === null ? min : Math.min(min, ...this.references),
          max === null ? max : Math.max(max, ...this.references), percent) },
      },
      axes: [
        {
          space: TICK_SPACE_PX,
          values: (u, splits, axis, space, incr) => (this.relativeTime
            ? splits.map((s) => formatDuration(s * 1000))
            : formatTimeTicks(splits.map((s) => s * 1000), incr * 1000)),
        },
        {
          size: VALUE_AXIS_PX,
          // Units the ticks do not carry name the axis.
          ...(KNOWN_UNITS.includes(unit) || !unit ? {} : { label: unit, labelSize: 18 }),
          values: (u, splits, axis, space, incr) => formatTicks(splits, unit, incr),
          ...(unit === 'bytes' || unit === 'bytes/s' ? { incrs: byteTickSteps() } : {}),
        },
      ],
      cursor: {
        drag: { x: true, y: false, setScale: false },
        sync: { key: this.syncKey },
      },
      hooks: {
        draw: [(u) => this.drawReferences(u), (u) => this.drawExtremes(u)],
        setSelect: [(u) => {
          const { left, width } = u.select;
          if (width > 4) {
            const start = u.posToVal(left, 'x') * 1000;
            const end = u.posToVal(left + width, 'x') * 1000;
            this.onZoom(Math.floor(start), Math.ceil(end));
          }
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
        }],
      },
    };
    this.plot = new window.uPlot(options, data, this.body);
    this.plot.root.classList.toggle('many', many);
    this.wireLegend();
    if (this.highlight !== null) {
      const key = this.highlight;
      this.highlight = null;
      this.setHighlight(key);
    }
  }

  // A dashed level across the plot for each reference value, named at its
  // right end ("limit 300 W").
  drawReferences(u) {
    if (!this.references.length) return;
    const { ctx } = u;
    const dpr = window.devicePixelRatio || 1;
    const { left, width } = u.bbox;
    ctx.save();
    ctx.strokeStyle = ctx.fillStyle = AGENT_COLOR;
    ctx.lineWidth = dpr;
    ctx.setLineDash([6 * dpr, 4 * dpr]);
    ctx.font = `${11 * dpr}px sans-serif`;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'bottom';
    for (const level of this.references) {
      const y = Math.round(u.valToPos(level, 'y', true));
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(left + width, y);
      ctx.stroke();
      ctx.fillText(`limit ${formatValue(level, this.unit)}`, left + width - 4 * dpr, y - 2 * dpr);
    }
    ctx.restore();
  }

  // Draws, over the lines, each extreme that leaves its line: a whisker
  // from the bucket's mean to it and a dot on it, in the line's colour
  // (faded with its line); the highlighted line's last, on top. Their
  // number is in the element's data-extremes.
  drawExtremes(u) {
    const { ctx } = u;
    const dpr = window.devicePixelRatio || 1;
    const { left, top, width, height } = u.bbox;
    const span = u.scales.y.max - u.scales.y.min;
    if (!(span > 0) || this.typical.length !== this.shown.length) return;
    const pxPerUnit = height / dpr / span;
    const radius = DOT_RADIUS_PX * dpr;
    const xs = u.data[0];
    const order = this.shown.map((_, i) => i);
    const lit = order.findIndex((i) => this.shown[i].key === this.highlight);
    if (lit >= 0) order.push(...order.splice(lit, 1));
    ctx.save();
    ctx.beginPath();
    // A dot at 0 % or at the newest bucket shows whole.
    ctx.rect(left - radius, top - radius, width + 2 * radius, height + 2 * radius);
    ctx.clip();
    ctx.lineWidth = WHISKER_PX * dpr;
    let drawn = 0;
    for (const i of order) {
      const [mean, max, min] = [u.data[1 + 3 * i], u.data[2 + 3 * i], u.data[3 + 3 * i]];
      const color = this.colorOf(this.shown[i], i);
      ctx.strokeStyle = ctx.fillStyle = this.faded(i) ? withAlpha(color, 0.25) : color;
      for (let j = 0; j < xs.length; j++) {
        const leaves = departures(j, mean, min, max, this.typical[i], pxPerUnit);
        if (!leaves.low && !leaves.high) continue;
        const x = Math.round(u.valToPos(xs[j], 'x', true));
        const from = u.valToPos(mean[j], 'y', true);
        for (const [out, value] of [[leaves.low, min[j]], [leaves.high, max[j]]]) {
          if (!out) continue;
          drawn += 1;
          const to = u.valToPos(value, 'y', true);
          ctx.beginPath();
          ctx.moveTo(x, from);
          ctx.lineTo(x, to);
          ctx.stroke();
          ctx.beginPath();
          ctx.arc(x, to, radius, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    }
    ctx.restore();
    this.element.dataset.extremes = String(drawn);
  }

  // Only each line's own row in the legend (its min and max are in it),
  // with the GPU's UUID or the metric's raw name on hover. Hovering a row
  // highlights its line; a click keeps it highlighted (instead of uPlot's
  // hiding the line), a second click releases it.
  wireLegend() {
    this.sticky = null;
    const legend = this.plot.root.querySelector('.u-legend');
    const rows = [...legend.querySelectorAll('.u-series')];
    rows.forEach((row, i) => {
      if (i === 0) {
        row.classList.add('time');
        return;
      }
      if ((i - 1) % 3 !== 0) {
        row.style.display = 'none';
        return;
      }
      const line = this.shown[(i - 1) / 3];
      row.title = line.label.title;
      row.dataset.series = line.label.text;
      const target = this.family.perGpu && line.series.gpuUuid ? line.series.gpuUuid : line.key;
      row.addEventListener('mouseenter', () => this.announce(target));
      row.addEventListener('mouseleave', () => this.announce(this.sticky));
      row.addEventListener('click', (e) => {
        e.stopPropagation();
        if (this.onPick) {
          this.onPick(line.series);
          return;
        }
        this.sticky = this.sticky === target ? null : target;
        this.announce(this.sticky);
      }, true);
    });
  }

  // A GPU chart's highlight goes to the owner, which passes it to every GPU
  // chart; another chart's stays its own.
  announce(target) {
    if (this.family.perGpu) this.onHighlight(target);
    else this.setHighlight(target);
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: Math.max(300, this.body.clientWidth), height: HEIGHT });
  }

  destroyPlot() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
    this.plotKeys = null;
  }
}
