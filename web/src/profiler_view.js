// One trial's profiler view: its state, an agent and GPU selector, and one
// chart per metric family over the whole run (or the zoomed window). While
// the trial is ACTIVE and the view is not zoomed, one follow stream (NDJSON)
// merges new buckets into the charts; it ends when the trial ends.
//
// Dragging across a chart zooms every chart to that window and refetches
// it with as many buckets as the chart has pixels, so the detail grows with
// the zoom, down to raw samples. "Reset zoom" returns to the whole run.

import { followSeries, getTrial, listSeries, querySeries } from './api.js';
import { FamilyChart } from './chart.js';
import { familiesFor } from './families.js';
import { formatDuration, formatTime } from './format.js';
import { showError } from './messages.js';

const RETRY_MS = 3000;
const MIN_WINDOW_MS = 1000;
const AXIS_PX = 80;  // chart.js's value axis

function extentOf(series) {
  let start = Infinity;
  let end = -Infinity;
  for (const s of series) {
    if (s.firstTime) start = Math.min(start, Date.parse(s.firstTime));
    if (s.lastTime) end = Math.max(end, Date.parse(s.lastTime));
  }
  return start <= end ? { startMs: start, endMs: end + 1 } : null;
}

function option(value, text) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = text;
  return o;
}

export class ProfilerView {
  constructor(root, trialId, config) {
    this.root = root;
    this.trialId = trialId;
    this.config = config;
    this.charts = new Map();  // family id -> FamilyChart
    this.zoom = null;  // {startMs, endMs} while zoomed in
    this.span = null;  // {startMs, endMs} the charts show
    this.generation = 0;  // answers of older loads are dropped
    this.follow = null;  // AbortController of the follow stream
    this.timer = null;
    this.closed = false;
    this.onResize = () => this.charts.forEach((c) => c.resize());
    window.addEventListener('resize', this.onResize);
  }

  async start() {
    this.root.innerHTML = `<p class="status">Loading trial ${this.trialId}…</p>`;
    let listed;
    try {
      [this.trial, listed] = await Promise.all([getTrial(this.trialId), listSeries(this.trialId)]);
    } catch (e) {
      if (this.closed) return;
      if (e.status === 404) {
        showError(this.root, `Trial ${this.trialId} not found`,
          { message: `The metrics service has no trial ${this.trialId}. ${e.message}.` });
      } else {
        showError(this.root, `Trial ${this.trialId} could not be loaded`, e, () => this.start());
      }
      return;
    }
    if (this.closed) return;
    this.series = listed.series || [];
    this.renderFrame();
    this.pickAgent(this.agents()[0]);
  }

  close() {
    this.closed = true;
    this.stopFollow();
    window.removeEventListener('resize', this.onResize);
    this.charts.forEach((c) => c.destroyPlot());
  }

  agents() {
    return [...new Set(this.series.map((s) => s.agentId))].sort();
  }

  renderFrame() {
    this.root.innerHTML = '';
    const head = document.createElement('div');
    head.className = 'trial-head';
    const title = document.createElement('h1');
    title.textContent = `Trial ${this.trialId}`;
    this.stateBadge = document.createElement('span');
    head.append(title, this.stateBadge);

    const controls = document.createElement('div');
    controls.className = 'controls';
    this.agentSelect = document.createElement('select');
    this.agentSelect.id = 'agent';
    this.agentSelect.addEventListener('change', () => this.pickAgent(this.agentSelect.value));
    this.gpuSelect = document.createElement('select');
    this.gpuSelect.id = 'gpu';
    this.gpuSelect.addEventListener('change', () => this.load());
    const agentLabel = document.createElement('label');
    agentLabel.append('Agent ', this.agentSelect);
    const gpuLabel = document.createElement('label');
    gpuLabel.append('GPU ', this.gpuSelect);
    this.resetButton = document.createElement('button');
    this.resetButton.id = 'reset-zoom';
    this.resetButton.textContent = 'Reset zoom';
    this.resetButton.hidden = true;
    this.resetButton.addEventListener('click', () => this.resetZoom());
    this.windowText = document.createElement('span');
    this.windowText.className = 'window';
    this.liveText = document.createElement('span');
    this.liveText.id = 'live';
    controls.append(agentLabel, gpuLabel, this.resetButton, this.windowText, this.liveText);
    if (this.config.grafanaUrl) {
      const link = document.createElement('a');
      link.id = 'grafana';
      link.href = `${this.config.grafanaUrl.replace(/\/+$/, '')}/d/metricsd-profiler/` +
        `profiler?var-trial_id=${this.trialId}`;
      link.target = '_blank';
      link.rel = 'noopener';
      link.textContent = 'Open in Grafana';
      controls.append(link);
    }
    this.chartsElement = document.createElement('div');
    this.chartsElement.className = 'charts';
    this.root.append(head, controls, this.chartsElement);
    this.showState();
    for (const agent of this.agents()) this.agentSelect.append(option(agent, agent));
  }

  showState() {
    const state = this.trial.state;
    this.stateBadge.className = `state state-${state.toLowerCase()}`;
    this.stateBadge.textContent = state;
    this.stateBadge.id = 'trial-state';
  }

  setLive(text, status) {
    this.liveText.textContent = text;
    this.liveText.dataset.status = status;
  }

  pickAgent(agent) {
    this.agent = agent;
    if (agent === undefined) {
      this.chartsElement.innerHTML = '<p class="status">No system metrics are stored for ' +
        'this trial yet.</p>';
      this.agentSelect.disabled = true;
      this.gpuSelect.disabled = true;
      if (this.trial.state === 'ACTIVE') {
        this.setLive('Waiting for the first metrics…', 'waiting');
        this.timer = setTimeout(() => this.refreshSeries().then(() => {
          if (!this.closed) this.pickAgent(this.agents()[0]);
        }), RETRY_MS);
      }
      return;
    }
    this.agentSelect.disabled = false;
    this.agentSelect.value = agent;
    const gpus = [...new Set(this.series
      .filter((s) => s.agentId === agent && s.gpuUuid).map((s) => s.gpuUuid))].sort();
    this.gpuSelect.innerHTML = '';
    this.gpuSelect.append(option('', gpus.length ? `All (${gpus.length})` : 'none'));
    for (const gpu of gpus) this.gpuSelect.append(option(gpu, gpu));
    this.gpuSelect.disabled = gpus.length === 0;
    this.load();
  }

  async refreshSeries() {
    try {
      this.series = (await listSeries(this.trialId)).series || [];
      const agents = this.agents();
      if (agents.length !== this.agentSelect.options.length) {
        this.agentSelect.innerHTML = '';
        for (const agent of agents) this.agentSelect.append(option(agent, agent));
        if (this.agent !== undefined) this.agentSelect.value = this.agent;
      }
    } catch (e) {
      // The charts' own loads report the failure.
    }
  }

  // The families and window to chart, then one query per family.
  load() {
    this.stopFollow();
    const generation = ++this.generation;
    const agentSeries = this.series.filter((s) => s.agentId === this.agent);
    const gpu = this.gpuSelect.value;
    const shown = agentSeries.filter((s) => !gpu || !s.gpuUuid || s.gpuUuid === gpu);
    const span = this.zoom || extentOf(shown);
    this.charts.forEach((c) => c.destroyPlot());
    this.charts.clear();
    this.chartsElement.innerHTML = '';
    if (!span) {
      this.chartsElement.innerHTML = '<p class="status">No samples stored yet.</p>';
      return;
    }
    this.span = span;
    this.windowText.textContent = `${formatTime(span.startMs)} – ${formatTime(span.endMs)} ` +
      `(${formatDuration(span.endMs - span.startMs)})`;
    const families = familiesFor(shown);
    for (const family of families) {
      const element = document.createElement('section');
      this.chartsElement.append(element);
      this.charts.set(family.id, new FamilyChart(element, family, {
        onZoom: (startMs, endMs) => this.zoomTo(startMs, endMs),
        syncKey: `trial-${this.trialId}`,
      }));
    }
    const maxPoints = this.maxPoints();
    const loads = families.map(async (family) => {
      const chart = this.charts.get(family.id);
      try {
        const answer = await querySeries(this.trialId, {
          names: family.names,
          agentId: this.agent,
          gpuUuids: family.perGpu && gpu ? [gpu] : [],
          startMs: span.startMs,
          endMs: span.endMs,
          maxPoints,
        });
        if (generation === this.generation) chart.setData(answer.series || []);
      } catch (e) {
        if (generation === this.generation) chart.showStatus(`Could not load: ${e.message}`, true);
      }
    });
    Promise.all(loads).then(() => {
      if (generation !== this.generation || this.closed) return;
      if (this.trial.state !== 'ACTIVE') {
        this.setLive(`Trial ${this.trial.state.toLowerCase()}; not live.`, 'ended');
      } else if (this.zoom) {
        this.setLive('Live view paused while zoomed in.', 'paused');
      } else {
        this.startFollow(generation);
      }
    });
  }

  // One bucket per pixel of a chart's plotting area (its width less the
  // value axis), within the API's bounds.
  maxPoints() {
    const body = this.chartsElement.querySelector('.chart-body');
    const width = (body ? body.clientWidth : 800) - AXIS_PX;
    return Math.max(100, Math.min(2000, Math.round(width)));
  }

  zoomTo(startMs, endMs) {
    if (endMs - startMs < MIN_WINDOW_MS) {
      const middle = (startMs + endMs) / 2;
      startMs = Math.floor(middle - MIN_WINDOW_MS / 2);
      endMs = startMs + MIN_WINDOW_MS;
    }
    this.zoom = { startMs, endMs };
    this.resetButton.hidden = false;
    this.load();
  }

  async resetZoom() {
    this.zoom = null;
    this.resetButton.hidden = true;
    await this.refreshSeries();
    this.load();
  }

  stopFollow() {
    if (this.follow) this.follow.abort();
    this.follow = null;
    clearTimeout(this.timer);
  }

  // Follows the charted series from the window's start; the first message
  // is the current answer, the rest the buckets that changed.
  startFollow(generation) {
    this.stopFollow();
    const controller = new AbortController();
    this.follow = controller;
    const familyOf = new Map();
    for (const [id, chart] of this.charts) {
      for (const name of chart.family.names) familyOf.set(name, id);
    }
    const gpu = this.gpuSelect.value;
    let first = true;
    this.setLive('Live: following new samples…', 'live');
    followSeries(this.trialId, {
      names: [...familyOf.keys()],
      agentId: this.agent,
      gpuUuids: gpu ? [gpu, ''] : [],
      startMs: this.span.startMs,
      maxPoints: this.maxPoints(),
    }, (result) => {
      const byFamily = new Map();
      for (const sb of result.series || []) {
        const id = familyOf.get(sb.series.name);
        if (!byFamily.has(id)) byFamily.set(id, []);
        byFamily.get(id).push(sb);
      }
      for (const [id, list] of byFamily) {
        const chart = this.charts.get(id);
        if (first) chart.setData(list);
        else chart.merge(list);
      }
      first = false;
      this.setLive(`Live: updated ${new Date().toLocaleTimeString()}`, 'live');
    }, controller.signal).then(async () => {
      if (controller.signal.aborted || generation !== this.generation) return;
      this.follow = null;
      try {
        this.trial = await getTrial(this.trialId);
      } catch (e) {
        // The stream ended cleanly, which it does when the trial ends.
        this.trial = { ...this.trial, state: 'ENDED' };
      }
      this.showState();
      this.setLive(`Trial ${this.trial.state.toLowerCase()}; live view stopped.`, 'ended');
    }, (e) => {
      if (controller.signal.aborted || e.name === 'AbortError') return;
      this.follow = null;
      this.setLive(`Live view interrupted: ${e.message} Retrying in ${RETRY_MS / 1000} s.`,
        'retrying');
      this.timer = setTimeout(() => {
        if (!this.closed && !this.zoom && generation === this.generation) {
          this.startFollow(generation);
        }
      }, RETRY_MS);
    });
  }
}
