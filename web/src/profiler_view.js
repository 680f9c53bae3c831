// One trial's profiler view: its state, an agent and GPU selector, and one
// chart per metric family over the whole run (or the zoomed window). While
// the trial is ACTIVE and the view is not zoomed, one follow stream (NDJSON)
// merges new buckets into the charts; it ends when the trial ends.
//
// Dragging across a chart zooms every chart to that window and refetches
// it with as many buckets as the chart has pixels, so the detail grows with
// the zoom, down to raw samples. "Reset zoom" returns to the whole run.

import { downloadExport, followSeries, getTrial, listSeries, querySeries } from './api.js';
import { FamilyChart, VALUE_AXIS_PX } from './chart.js';
import { GROUPS, familiesFor, gpuIndexes } from './families.js';
import { formatDuration, formatHardware, formatTime, formatValue, widenedWindow } from './format.js';
import { sentence, showError } from './messages.js';

const RETRY_MS = 3000;
const ACTIVITY_POLL_MS = 5000;  // how often an ACTIVE trial's agents are checked
const MIN_WINDOW_MS = 1000;

function extentOf(series) {
  let start = Infinity;
  let end = -Infinity;
  for (const s of series) {
    if (s.firstTime) start = Math.min(start, Date.parse(s.firstTime));
    if (s.lastTime) end = Math.max(end, Date.parse(s.lastTime));
  }
  return start <= end ? { startMs: start, endMs: end + 1 } : null;
}

// Where a follow can start from a chart answer (its CHART view's series):
// the oldest of the series' newest drawn buckets (or raw points), at the
// answer's one resolution; null when the series are at different
// resolutions or none has data (the follow then starts from the window).
export function drawnEnd(series) {
  let resolutionMs = null;
  let startMs = null;
  for (const sb of series) {
    const res = Number(sb.resolutionMs);
    let last = null;
    for (let i = sb.mean.length - 1; i >= 0 && last === null; i--) {
      if (sb.mean[i] === null && sb.min[i] === null) continue;
      last = sb.bucketStartMs ? sb.bucketStartMs[i] : sb.firstBucketMs + i * res;
    }
    if (last === null) continue;
    if (resolutionMs !== null && res !== resolutionMs) return null;
    resolutionMs = res;
    startMs = startMs === null ? last : Math.min(startMs, last);
  }
  return startMs === null ? null : { startMs: Math.floor(startMs), resolutionMs };
}

function option(value, text, title = '') {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = text;
  if (title) o.title = title;
  return o;
}

export class ProfilerView {
  // `agent`: the agent to show first (else the first by name).
  constructor(root, trialId, config, agent) {
    this.root = root;
    this.trialId = trialId;
    this.initialAgent = agent;
    this.config = config;
    this.charts = new Map();  // family id -> FamilyChart
    this.zoom = null;  // {startMs, endMs} while zoomed in
    this.span = null;  // {startMs, endMs} the charts show
    this.generation = 0;  // answers of older loads are dropped
    this.follow = null;  // AbortController of the follow stream
    this.drawnEnd = null;  // where the next follow starts (drawnEnd)
    this.timer = null;
    this.activityTimer = null;
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
        showError(this.root, `Trial ${this.trialId} does not exist.`,
          { message: 'The trial list shows every trial the metrics service knows.' });
      } else {
        showError(this.root, `Trial ${this.trialId} could not be loaded.`, e, () => this.start());
      }
      return;
    }
    if (this.closed) return;
    this.series = listed.series || [];
    this.renderFrame();
    this.pickAgent(this.agents().includes(this.initialAgent) ? this.initialAgent
      : this.agents()[0]);
    this.pollActivity();
  }

  close() {
    this.closed = true;
    this.stopFollow();
    clearTimeout(this.activityTimer);
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
    const downloads = document.createElement('span');
    downloads.className = 'downloads';
    for (const [kind, text] of [['csv', 'Download CSV'], ['trace', 'Download trace']]) {
      const button = document.createElement('button');
      button.id = `download-${kind}`;
      button.textContent = text;
      button.title = kind === 'csv'
        ? 'Every raw sample of this agent in the window shown, as CSV'
        : 'This agent\'s charts in the window shown, as a trace for Perfetto ' +
          '(docs/export.md: beside a PyTorch trace)';
      button.addEventListener('click', () => this.download(kind, button));
      downloads.append(button);
    }
    this.downloadStatus = document.createElement('span');
    this.downloadStatus.id = 'download-status';
    downloads.append(this.downloadStatus);
    this.windowText = document.createElement('span');
    this.windowText.className = 'window';
    this.liveText = document.createElement('span');
    this.liveText.id = 'live';
    this.agentStatus = document.createElement('span');
    this.agentStatus.id = 'agent-status';
    this.nodesLink = document.createElement('a');
    this.nodesLink.id = 'all-agents';
    this.nodesLink.href = `#/trials/${this.trialId}/nodes`;
    this.nodesLink.textContent = 'All agents';
    this.nodesLink.title = 'Every agent of this trial at once, one line each';
    controls.append(agentLabel, this.nodesLink, gpuLabel, this.resetButton, this.windowText, downloads,
      this.agentStatus, this.liveText);
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
    this.hardwareText = document.createElement('p');
    this.hardwareText.id = 'hardware';
    this.hardwareText.className = 'hardware';
    this.chartsElement = document.createElement('div');
    this.chartsElement.className = 'charts';
    this.root.append(head, controls, this.hardwareText, this.chartsElement);
    this.showState();
    this.fillAgents();
  }

  // The agent selector, each agent marked when it is stale; left alone
  // when nothing changed (an open selector stays open).
  fillAgents() {
    const texts = this.agents().map((agent) => {
      const activity = this.activityOf(agent);
      return [agent, activity && activity.stale ? `${agent} (stale)` : agent];
    });
    const shown = [...this.agentSelect.options].map((o) => o.textContent);
    if (shown.join('\n') === texts.map(([, text]) => text).join('\n')) return;
    this.agentSelect.innerHTML = '';
    for (const [agent, text] of texts) this.agentSelect.append(option(agent, text));
    if (this.agent !== undefined) this.agentSelect.value = this.agent;
  }

  activityOf(agent) {
    return (this.trial.agents || []).find((a) => a.agentId === agent);
  }

  // Says when the shown agent last reported, and whether it is stale (an
  // ACTIVE trial whose agent has been quiet longer than the server's
  // --stale-after: its host or job may be gone).
  showActivity() {
    const activity = this.activityOf(this.agent);
    this.showHardware(activity && activity.inventory);
    if (!activity || !activity.lastSampleAt) {
      this.agentStatus.textContent = '';
      delete this.agentStatus.dataset.stale;
      return;
    }
    const last = Date.parse(activity.lastSampleAt);
    const ago = formatDuration(Math.max(0, Date.now() - last));
    this.agentStatus.dataset.stale = String(Boolean(activity.stale));
    this.agentStatus.textContent = activity.stale
      ? `Stale: no samples from ${this.agent} since ${formatTime(last)} (${ago} ago); ` +
        'its host or job may have stopped.'
      : `Last sample ${formatTime(last)}.`;
    if (activity.stale && this.follow) {
      this.setLive(`Live, but ${this.agent} has sent nothing for ${ago}.`, 'stale');
    }
    // The header's window follows live data.
    const shownEnd = Number(this.windowText.dataset.endMs) || 0;
    if (this.span && !this.zoom && last + 1 > shownEnd) this.showWindow(this.span.startMs, last + 1);
  }

  // What the shown agent runs on, from the inventory it sent.
  showHardware(inventory) {
    const text = formatHardware(inventory);
    this.hardwareText.textContent = text ? `Hardware: ${text}` : '';
    this.hardwareText.title = inventory
      ? [inventory.hostName, inventory.agentVersion].filter(Boolean).join(', ') : '';
  }

  // Why the shown agent has no GPU charts, when its inventory says: the
  // sentence its agent sent ("NVML not available: libnvidia-ml.so.1 not
  // found"), shown where the GPU charts would be.
  noGpuNotice(agentSeries) {
    const activity = this.activityOf(this.agent);
    const inventory = activity && activity.inventory;
    if (!inventory || agentSeries.some((s) => s.gpuUuid)) return null;
    const why = inventory.gpuStatus || ((inventory.gpus || []).length ? '' : 'NVML found no GPUs');
    if (!why) return null;
    const p = document.createElement('p');
    p.id = 'no-gpus';
    p.className = 'status no-gpus';
    p.textContent = `No GPU charts for ${this.agent}: ${sentence(why)}`;
    return p;
  }

  // The folding section of a family group, open unless the user closed it
  // (remembered in this browser).
  groupSection(group) {
    const details = document.createElement('details');
    details.className = 'family-group';
    details.dataset.group = group;
    const key = `profiler.fold.${group}`;
    details.open = window.localStorage.getItem(key) !== 'closed';
    const summary = document.createElement('summary');
    summary.textContent = GROUPS[group] || group;
    const grid = document.createElement('div');
    grid.className = 'group-charts';
    details.append(summary, grid);
    details.addEventListener('toggle', () => {
      window.localStorage.setItem(key, details.open ? 'open' : 'closed');
      if (details.open) this.charts.forEach((c) => c.resize());
    });
    return details;
  }

  // While the trial is ACTIVE, its agents' last sample times, every few
  // seconds: a stale agent is marked without a reload.
  pollActivity() {
    clearTimeout(this.activityTimer);
    if (this.closed || this.trial.state !== 'ACTIVE') return;
    this.activityTimer = setTimeout(async () => {
      try {
        const trial = await getTrial(this.trialId);
        if (this.closed) return;
        this.trial = trial;
        this.showState();
        this.fillAgents();
        this.showActivity();
      } catch (e) {
        // The follow stream reports a lost connection; try again later.
      }
      this.pollActivity();
    }, ACTIVITY_POLL_MS);
  }

  // Downloads the window on screen (zoomed or whole) of the agent shown.
  async download(kind, button) {
    const shown = this.zoom || this.span;
    button.disabled = true;
    this.downloadStatus.textContent = 'Preparing the file…';
    try {
      const { fileName, bytes } = await downloadExport(this.trialId, kind, {
        agentId: this.agent, startMs: shown ? shown.startMs : undefined,
        endMs: shown ? shown.endMs : undefined });
      this.downloadStatus.textContent = `Saved ${fileName} (${formatValue(bytes, 'bytes')}).`;
    } catch (e) {
      this.downloadStatus.textContent = `The download failed: ${sentence(e.message)}`;
    } finally {
      button.disabled = false;
    }
  }

  showWindow(startMs, endMs) {
    this.windowText.dataset.endMs = String(endMs);
    this.windowText.textContent = `${formatTime(startMs)} – ${formatTime(endMs)} ` +
      `(${formatDuration(endMs - startMs)})`;
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
    this.gpus = gpuIndexes(this.series.filter((s) => s.agentId === agent));
    this.gpuSelect.innerHTML = '';
    this.gpuSelect.append(option('', this.gpus.size ? `All (${this.gpus.size})` : 'none'));
    for (const [uuid, index] of this.gpus) this.gpuSelect.append(option(uuid, `GPU ${index}`, uuid));
    this.gpuSelect.disabled = this.gpus.size === 0;
    this.showActivity();
    this.load();
  }

  async refreshSeries() {
    try {
      this.series = (await listSeries(this.trialId)).series || [];
      if (this.agents().length !== this.agentSelect.options.length) this.fillAgents();
    } catch (e) {
      // The charts' own loads report the failure.
    }
  }

  // The families and window to chart, then one query for all of them (one
  // read of the agent's stored buckets rather than one per chart).
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
    this.showWindow(span.startMs, span.endMs);
    const families = familiesFor(shown);
    const notice = this.noGpuNotice(agentSeries);
    if (notice) this.chartsElement.append(notice);
    const groups = new Map();
    for (const family of families) {
      const element = document.createElement('section');
      if (family.group) {
        if (!groups.has(family.group)) {
          groups.set(family.group, this.groupSection(family.group));
          this.chartsElement.append(groups.get(family.group));
        }
        groups.get(family.group).querySelector('.group-charts').append(element);
      } else {
        this.chartsElement.append(element);
      }
      this.charts.set(family.id, new FamilyChart(element, family, {
        onZoom: (startMs, endMs) => this.zoomTo(startMs, endMs),
        syncKey: `trial-${this.trialId}`,
        gpus: this.gpus,
        onHighlight: (gpu) => this.charts.forEach((c) => c.family.perGpu && c.setHighlight(gpu)),
      }));
    }
    const familyOf = new Map();
    for (const family of families) {
      for (const name of family.names) familyOf.set(name, family.id);
    }
    this.drawnEnd = null;
    const loaded = querySeries(this.trialId, {
      names: [...familyOf.keys()],
      agentId: this.agent,
      gpuUuids: gpu ? [gpu, ''] : [],
      startMs: span.startMs,
      endMs: span.endMs,
      maxPoints: this.maxPoints(),
    }).then((answer) => {
      if (generation !== this.generation) return;
      const byFamily = new Map(families.map((f) => [f.id, []]));
      for (const sb of answer.series || []) {
        const list = byFamily.get(familyOf.get(sb.series.name));
        if (list) list.push(sb);
      }
      for (const [id, list] of byFamily) this.charts.get(id).setData(list, answer.rawExpired === true);
      this.drawnEnd = answer.rawExpired ? null : drawnEnd(answer.series || []);
    }, (e) => {
      if (generation !== this.generation) return;
      const text = `The charts could not be loaded: ${sentence(e.message)}`;
      this.charts.forEach((c) => c.showStatus(text, true));
    });
    loaded.then(() => {
      if (generation !== this.generation || this.closed) return;
      if (this.trial.state !== 'ACTIVE') {
        this.setLive(`This trial is ${this.trial.state.toLowerCase()}: no new samples will arrive.`,
          'ended');
      } else if (this.zoom) {
        this.setLive('Live updates pause while zoomed in; Reset zoom resumes them.', 'paused');
      } else {
        this.startFollow(generation, this.drawnEnd);
      }
    });
  }

  // One bucket per pixel of a chart's plotting area (its width less the
  // value axis), within the API's bounds.
  maxPoints() {
    const body = this.chartsElement.querySelector('.chart-body');
    const width = (body ? body.clientWidth : 800) - VALUE_AXIS_PX;
    return Math.max(100, Math.min(2000, Math.round(width)));
  }

  zoomTo(startMs, endMs) {
    this.zoom = widenedWindow(startMs, endMs, MIN_WINDOW_MS);
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

  // Follows the charted series: from the answer just drawn when `from`
  // (drawnEnd's) is given, so the first message holds only its newest
  // bucket and what came since; else from the window's start, the first
  // message then being the whole current answer. The rest are the buckets
  // that changed.
  startFollow(generation, from = null) {
    this.stopFollow();
    const controller = new AbortController();
    this.follow = controller;
    const familyOf = new Map();
    for (const [id, chart] of this.charts) {
      for (const name of chart.family.names) familyOf.set(name, id);
    }
    const gpu = this.gpuSelect.value;
    let first = from === null;
    this.setLive('Live: following new samples…', 'live');
    followSeries(this.trialId, {
      names: [...familyOf.keys()],
      agentId: this.agent,
      gpuUuids: gpu ? [gpu, ''] : [],
      startMs: from === null ? this.span.startMs : from.startMs,
      maxPoints: this.maxPoints(),
      resolutionMs: from === null ? undefined : from.resolutionMs,
    }, (result) => {
      const byFamily = new Map();
      for (const sb of result.series || []) {
        const id = familyOf.get(sb.series.name);
        if (!byFamily.has(id)) byFamily.set(id, []);
        byFamily.get(id).push(sb);
      }
      let newest = Number(this.windowText.dataset.endMs) || this.span.endMs;
      for (const [id, list] of byFamily) {
        const chart = this.charts.get(id);
        if (first) chart.setData(list, result.rawExpired === true);
        else chart.merge(list);
        if (chart.lastSampleMs !== null) newest = Math.max(newest, chart.lastSampleMs + 1);
      }
      first = false;
      this.showWindow(this.span.startMs, newest);
      this.setLive(`Live: updated ${formatTime(Date.now())}.`, 'live');
      this.showActivity();
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
      this.setLive(`This trial is ${this.trial.state.toLowerCase()}: live updates stopped.`,
        'ended');
    }, (e) => {
      if (controller.signal.aborted || e.name === 'AbortError') return;
      this.follow = null;
      const why = e.unreachable ? 'the connection to the metrics service was lost.'
        : sentence(e.message);
      this.setLive(`Live updates paused: ${why} Retrying in ${RETRY_MS / 1000} s.`, 'retrying');
      this.timer = setTimeout(() => {
        if (!this.closed && !this.zoom && generation === this.generation) {
          this.startFollow(generation);
        }
      }, RETRY_MS);
    });
  }
}
