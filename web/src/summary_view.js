// Summary views, one request each (SummarizeSeries): every node of a trial
// ("#/trials/<id>/nodes": one line per agent, a click on an agent's legend
// entry opens its own view) and runs compared ("#/compare?trials=7,9,12":
// one line per trial, relative to each trial's start or on wall-clock
// time). A line is its GPUs' pooled mean, min or max (the user's choice),
// or one GPU's; the band and the extremes are every pooled sample's, so one
// GPU's stall on one node still shows. Dragging across a chart zooms every
// chart and refetches at the finer resolution.

import { summarize } from './api.js';
import { FamilyChart, VALUE_AXIS_PX } from './chart.js';
import { displayName, familiesFor } from './families.js';
import { formatDuration, formatTime, widenedWindow } from './format.js';
import { sentence, showError } from './messages.js';

export const MAX_COMPARED = 8;
const MIN_WINDOW_MS = 1000;
// Buckets per pixel of plot width: many lines (16 nodes, 8 runs) overlap,
// so one bucket per two pixels; each bucket's min and max stay exact.
const BUCKETS_PER_PX = 0.5;

function select(id, label, choices, value, onChange) {
  const element = document.createElement('select');
  element.id = id;
  for (const [v, text] of choices) {
    const o = document.createElement('option');
    o.value = v;
    o.textContent = text;
    element.append(o);
  }
  element.value = value;
  element.addEventListener('change', () => onChange(element.value));
  const wrapper = document.createElement('label');
  wrapper.append(`${label} `, element);
  return wrapper;
}

// The families a summary charts: pooled lines have no GPU of their own, so
// a family whose lines are shares of a GPU's total, or that draws a GPU's
// limit, charts its own metrics alone.
function summaryFamilies(series) {
  return familiesFor(series).filter((f) => !f.share).map((f) => ({
    ...f,
    perGpu: false,
    reference: undefined,
    names: f.names.filter((n) => n !== f.reference),
  }));
}

// A CHART answer's series with the chosen statistic as the line's mean and,
// in relative time, bucket starts as offsets from the trial's origin.
function prepared(sb, statistic, relative) {
  const out = { ...sb };
  if (statistic !== 'mean') out.mean = sb[statistic];
  if (relative) {
    const origin = Number(sb.originMs || 0);
    const resolution = Number(sb.resolutionMs);
    const starts = sb.bucketStartMs
      || sb.mean.map((_, i) => sb.firstBucketMs + i * resolution);
    out.bucketStartMs = starts.map((t) => t - origin);
    delete out.firstBucketMs;
    delete out.lastSampleMs;
  }
  return out;
}

export class SummaryView {
  // mode 'nodes' (trialIds: one) or 'compare' (up to MAX_COMPARED).
  constructor(root, mode, trialIds) {
    this.root = root;
    this.mode = mode;
    this.trialIds = trialIds;
    this.charts = new Map();
    this.zoom = null;
    this.relative = mode === 'compare';
    this.statistic = 'mean';
    this.gpuIndex = '';
    this.generation = 0;
    this.closed = false;
    this.onResize = () => this.charts.forEach((c) => c.resize());
    window.addEventListener('resize', this.onResize);
  }

  close() {
    this.closed = true;
    window.removeEventListener('resize', this.onResize);
    this.charts.forEach((c) => c.destroyPlot());
  }

  async start() {
    const what = this.mode === 'nodes' ? `trial ${this.trialIds[0]}'s agents`
      : `trials ${this.trialIds.join(', ')}`;
    if (this.trialIds.length === 0 || this.trialIds.length > MAX_COMPARED) {
      showError(this.root, `Choose 1 to ${MAX_COMPARED} trials to compare.`,
        { message: 'Tick them in the trial list, or list them in the address: #/compare?trials=7,9,12.' });
      return;
    }
    this.root.innerHTML = `<p class="status">Loading ${what}…</p>`;
    // The first answer (every metric) says which charts to draw: one
    // request, not a series list per trial first.
    let answer;
    try {
      // The charts are not drawn yet: two to a row, as app.css lays them out.
      const plotWidth = Math.max(300, this.root.clientWidth / 2 - 48) - VALUE_AXIS_PX;
      answer = await this.fetch(Math.max(100, Math.round(plotWidth * BUCKETS_PER_PX)));
    } catch (e) {
      if (this.closed) return;
      showError(this.root, `The summary of ${what} could not be loaded.`, e, () => this.start());
      return;
    }
    if (this.closed) return;
    const series = (answer.series || []).map((sb) => sb.series);
    this.families = summaryFamilies(series.map((s) => ({ ...s, gpuUuid: s.gpuCount ? 'pooled' : '' })));
    const perAgent = series.map((s) => Math.ceil((s.gpuCount || 0) / Math.max(1, s.agentCount || 1)));
    this.gpuCount = Math.max(0, ...perAgent);
    this.renderFrame();
    this.load(answer);
  }

  // The summary of every metric in the window shown.
  fetch(maxPoints) {
    return summarize({
      trialIds: this.trialIds,
      group: this.mode === 'nodes' ? 'AGENT' : 'TRIAL',
      gpuIndex: this.gpuIndex,
      relative: this.relative,
      startMs: this.zoom ? this.zoom.startMs : undefined,
      endMs: this.zoom ? this.zoom.endMs : undefined,
      maxPoints,
    });
  }

  renderFrame() {
    this.root.innerHTML = '';
    const title = document.createElement('h1');
    title.textContent = this.mode === 'nodes'
      ? `Trial ${this.trialIds[0]}: all agents`
      : `Comparing trials ${this.trialIds.join(', ')}`;
    const controls = document.createElement('div');
    controls.className = 'controls';
    if (this.mode === 'compare') {
      controls.append(select('time-axis', 'Time', [['relative', 'since each start'],
        ['wall', 'wall-clock']], 'relative', (v) => {
        this.relative = v === 'relative';
        this.zoom = null;
        this.load();
      }));
    }
    controls.append(select('statistic', 'Line', [['mean', 'mean of the GPUs'],
      ['min', 'min of the GPUs'], ['max', 'max of the GPUs']], 'mean', (v) => {
      this.statistic = v;
      this.load();
    }));
    const gpus = [['', 'all']];
    for (let i = 0; i < this.gpuCount; i++) gpus.push([String(i), `GPU ${i} only`]);
    controls.append(select('gpu-index', 'GPUs', gpus, '', (v) => {
      this.gpuIndex = v;
      this.load();
    }));
    this.resetButton = document.createElement('button');
    this.resetButton.id = 'reset-zoom';
    this.resetButton.textContent = 'Reset zoom';
    this.resetButton.hidden = true;
    this.resetButton.addEventListener('click', () => {
      this.zoom = null;
      this.resetButton.hidden = true;
      this.load();
    });
    this.windowText = document.createElement('span');
    this.windowText.className = 'window';
    controls.append(this.resetButton, this.windowText);
    const hint = document.createElement('p');
    hint.className = 'hardware';
    hint.textContent = this.mode === 'nodes'
      ? 'One line per agent, its GPUs pooled; the band spans every GPU\'s samples. ' +
        'Click an agent in a legend to open its own view.'
      : 'One line per trial, its GPUs pooled; the band spans every GPU\'s samples.';
    this.chartsElement = document.createElement('div');
    this.chartsElement.className = 'charts';
    this.root.append(title, controls, hint, this.chartsElement);
  }

  maxPoints() {
    const body = this.chartsElement.querySelector('.chart-body');
    const width = (body ? body.clientWidth : 800) - VALUE_AXIS_PX;
    return Math.max(100, Math.min(2000, Math.round(width * BUCKETS_PER_PX)));
  }

  // A line's legend entry: its agent or trial, and its metric where the
  // family charts several (disk read and write).
  lineLabel(family, series) {
    const metric = family.names.length > 1 ? ` · ${displayName(series.name)}` : '';
    if (this.mode === 'nodes') {
      const gpus = series.gpuCount ? ` (${series.gpuCount} GPU${series.gpuCount === 1 ? '' : 's'})` : '';
      return { text: `${series.agentId}${metric}`,
        title: `${series.agentId}${gpus}: click to open its view` };
    }
    const gpus = series.gpuCount ? `, ${series.gpuCount} GPUs pooled` : '';
    return { text: `Trial ${series.trialId}${metric}`,
      title: `Trial ${series.trialId}: ${series.agentCount} agent(s)${gpus}` };
  }

  // Draws the charts from `first` (an answer already fetched) or a fresh
  // fetch at the charts' width.
  load(first) {
    const generation = ++this.generation;
    this.charts.forEach((c) => c.destroyPlot());
    this.charts.clear();
    this.chartsElement.innerHTML = '';
    if (this.families.length === 0) {
      this.chartsElement.innerHTML = '<p class="status">No samples stored yet.</p>';
      return;
    }
    const familyOf = new Map();
    for (const family of this.families) {
      const element = document.createElement('section');
      this.chartsElement.append(element);
      for (const name of family.names) familyOf.set(name, family.id);
      this.charts.set(family.id, new FamilyChart(element, family, {
        onZoom: (startMs, endMs) => this.zoomTo(startMs, endMs),
        syncKey: `summary-${this.mode}`,
        lineLabel: (series) => this.lineLabel(family, series),
        onPick: this.mode === 'nodes' ? (series) => {
          location.hash = `#/trials/${this.trialIds[0]}?agent=${encodeURIComponent(series.agentId)}`;
        } : null,
        relativeTime: this.relative,
      }));
    }
    (first ? Promise.resolve(first) : this.fetch(this.maxPoints())).then((answer) => {
      if (generation !== this.generation || this.closed) return;
      const start = Date.parse(answer.start);
      const end = Date.parse(answer.end);
      if (Number.isFinite(start) && Number.isFinite(end)) {
        this.windowText.textContent = this.relative
          ? `+${formatDuration(start)} – +${formatDuration(end)} of each run`
          : `${formatTime(start)} – ${formatTime(end)} (${formatDuration(end - start)})`;
      }
      const byFamily = new Map(this.families.map((f) => [f.id, []]));
      for (const sb of answer.series || []) {
        const list = byFamily.get(familyOf.get(sb.series.name));
        if (list) list.push(prepared(sb, this.statistic, this.relative));
      }
      for (const [id, list] of byFamily) {
        this.charts.get(id).setData(list, answer.rawExpired === true);
      }
    }, (e) => {
      if (generation !== this.generation) return;
      const text = `The charts could not be loaded: ${sentence(e.message)}`;
      this.charts.forEach((c) => c.showStatus(text, true));
    });
  }

  zoomTo(startMs, endMs) {
    this.zoom = widenedWindow(startMs, endMs, MIN_WINDOW_MS);
    this.resetButton.hidden = false;
    this.load();
  }
}
