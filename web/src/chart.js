// One chart of one metric family: per series, the band between the
// bucket's minimum and maximum with its mean as a line, so a one-sample
// spike stays visible at any zoom. Holds the buckets it was given by time,
// so follow updates (changed buckets only) merge into them. Dragging across
// the chart asks the owner to zoom to that time window.
//
// Uses uPlot (window.uPlot, served by metricsd from npm's package).

import { seriesLabel } from './families.js';
import { byteTickSteps, formatResolution, formatTick, formatValue } from './format.js';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
  '#8c564b', '#e377c2', '#17becf'];

function withAlpha(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function seriesKey(s) {
  return `${s.agentId}\u0000${s.gpuUuid}\u0000${s.name}`;
}

export class FamilyChart {
  // `element` is emptied and filled; onZoom(startMs, endMs) on a drag.
  constructor(element, family, { onZoom, syncKey }) {
    this.family = family;
    this.onZoom = onZoom;
    this.syncKey = syncKey;
    this.lines = new Map();  // series key -> {series, buckets: Map(ms -> {min,max,mean})}
    this.resolutionMs = null;
    this.unit = '';
    this.plot = null;
    element.classList.add('chart');
    element.dataset.family = family.id;
    element.innerHTML = '';
    const head = document.createElement('div');
    head.className = 'chart-head';
    this.titleElement = document.createElement('h2');
    this.titleElement.textContent = family.title;
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

  // Replaces the chart's data with a QuerySeries answer's series.
  setData(seriesBuckets) {
    this.lines.clear();
    this.resolutionMs = null;
    this.merge(seriesBuckets);
  }

  // Merges changed buckets (a follow message's series) into the chart.
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
      for (let i = 0; i < sb.bucketStartMs.length; i++) {
        line.buckets.set(sb.bucketStartMs[i],
          { min: sb.min[i], max: sb.max[i], mean: sb.mean[i] });
      }
    }
    this.render();
  }

  render() {
    const lines = [...this.lines.values()]
      .filter((l) => l.buckets.size > 0)
      .sort((a, b) => seriesLabel(this.family, a.series)
        .localeCompare(seriesLabel(this.family, b.series)));
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
    const known = ['percent', 'bytes', 'bytes/s'].includes(this.unit);
    this.detailElement.textContent = (known || !this.unit ? '' : `${this.unit} · `) +
      formatResolution(this.resolutionMs);
    this.element.dataset.resolutionMs = String(this.resolutionMs);
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
    const labels = lines.map((l) => seriesLabel(this.family, l.series)).join('|');
    if (this.plot && this.plotLabels === labels) {
      this.plot.setData(data);
    } else {
      this.createPlot(lines, data);
      this.plotLabels = labels;
    }
    this.element.dataset.state = 'ready';
  }

  createPlot(lines, data) {
    this.destroyPlot();
    this.body.innerHTML = '';
    const unit = this.unit;
    const format = (v) => formatValue(v, unit);
    const series = [{}];
    const bands = [];
    lines.forEach((line, i) => {
      const color = COLORS[i % COLORS.length];
      const mean = series.length;
      series.push({
        label: seriesLabel(this.family, line.series),
        stroke: color,
        width: 1.5,
        spanGaps: true,
        // The legend shows the bucket's mean, then its range.
        value: (u, v, s, idx) => (idx === null || v === null ? '–'
          : `${format(v)} (${format(u.data[mean + 2][idx])} – ${format(u.data[mean + 1][idx])})`),
      });
      series.push({ label: 'max', stroke: withAlpha(color, 0.45), width: 1, spanGaps: true, value: (u, v) => format(v) });
      series.push({ label: 'min', stroke: withAlpha(color, 0.45), width: 1, spanGaps: true, value: (u, v) => format(v) });
      bands.push({ series: [mean + 1, mean + 2], fill: withAlpha(color, 0.18) });
    });
    const percent = unit === 'percent';
    const options = {
      width: Math.max(300, this.body.clientWidth || 600),
      height: 200,
      series,
      bands,
      scales: {
        x: {
          time: true,
          // A lone point (a fresh trial's first seconds, an agent that died
          // early): a minute either side. uPlot widens it to 1000 days (its
          // one day, taken as milliseconds) before asking here.
          range: (u, min, max) => {
            const xs = u.data[0];
            return xs.length === 1 ? [xs[0] - 60, xs[0] + 60] : [min, max];
          },
        },
        y: {
          range: (u, min, max) => {
            if (percent) return [0, Math.max(100, max)];
            const top = max > 0 ? max * 1.08 : 1;
            return [Math.min(0, min), top];
          },
        },
      },
      axes: [
        {},
        {
          size: 80,
          values: (u, values) => values.map((v) => formatTick(v, unit)),
          ...(unit === 'bytes' || unit === 'bytes/s' ? { incrs: byteTickSteps() } : {}),
        },
      ],
      cursor: {
        drag: { x: true, y: false, setScale: false },
        sync: { key: this.syncKey },
      },
      hooks: {
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
    // Only each series' own row in the legend; its min and max are in it.
    this.plot.root.querySelectorAll('.u-legend .u-series').forEach((row, i) => {
      if (i > 0 && (i - 1) % 3 !== 0) row.style.display = 'none';
    });
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: Math.max(300, this.body.clientWidth), height: 200 });
  }

  destroyPlot() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
    this.plotLabels = null;
  }
}
