// The profiler page in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core; no browser is ever downloaded) against a real
// metricsd on a throwaway database of the PostgreSQL test.sh starts (PG*
// variables), with API tokens required (metricsd's default). It seeds a
// 7-day run with one single-sample spike, then checks what a user sees: the
// sign-in (a token refused, then one taken from the address run.sh prints
// and removed from the address bar), the trial list, every chart drawn, the spike as
// its bucket's maximum, finer data on zoom down to raw points, a new sample
// arriving live, the end of the trial, 8 GPUs' legends, stale agents, and
// the error states, and the CSV and trace downloads of the zoomed window. It saves screenshots in ARTIFACT_DIR: the live 8-GPU
// week (profiler_page.png), a fresh trial's first 30 s
// (profiler_page_fresh.png), and the page as the last step left it
// (profiler_page_last.png). Revoking the page's token sends it back to
// sign-in.
//
// Usage: node profiler_page_test.js PATH/TO/metricsd PATH/TO/metricsctl ARTIFACT_DIR

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { Metricsd } from '../../tests/testing/metricsd_process.mjs';

const [metricsdPath, metricsctlPath, artifactDir] = process.argv.slice(2);
if (!metricsdPath || !metricsctlPath || !artifactDir) {
  console.error('usage: node profiler_page_test.js PATH/TO/metricsd PATH/TO/metricsctl ' +
    'ARTIFACT_DIR');
  process.exit(2);
}
const webRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';

const DAY_MS = 86400000;
const STEP_MS = 60000;  // one sample a minute for 7 days: 10 080 instants
const RUN_TRIAL = 42;
const DONE_TRIAL = 41;
const STALE_TRIAL = 43;  // ACTIVE; one agent reports, one stopped an hour ago
const FRESH_TRIAL = 44;  // ACTIVE; its first 30 s, a sample a second
const AGENT = 'agent-1';
// Eight GPUs, in the order the agent reports them (not sorted: the page
// numbers them in this order).
const GPUS = ['GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9b', 'GPU-0b7d2a91-3c4e-4f5a-8b6c-7d8e9f0a1b2c',
  'GPU-e2a4c6b8-1d3f-4a5b-9c7d-2e4f6a8b0c1d', 'GPU-3a5c7e9b-2d4f-4b6d-8e0a-3c5e7a9b1d2f',
  'GPU-c9e1a3b5-4d6f-4c8e-9a0b-4d6f8b0c2e3a', 'GPU-7b9d1f3a-5c7e-4d9f-8b1c-5e7a9c1d3f4b',
  'GPU-1d3f5b7c-6e8a-4e0b-9c2d-6f8b0d2e4a5c', 'GPU-a8c0e2f4-7b9d-4f1c-8d3e-7a9c1e3f5b6d'];
const CPU_SERIES = 2 * GPUS.length;  // index in SERIES
const STALE_AFTER = '10m';  // metricsd's --stale-after here: the test runs well within it
const SPIKE_INDEX = 5003;
const LIVE_CPU = 97.5;  // above every seeded CPU value
const FAMILIES = ['gpu_util', 'gpu_free_memory', 'cpu', 'memory', 'disk_iops',
  'disk_throughput', 'network'];
// COMPLETED: a week of 8 GPUs, a sample every 2 minutes, with one-sample
// extremes planted on different GPUs at different times. Utilization is
// noisy between 85 % and 95 % for the first half and near 30 % after.
const EXTREMES_TRIAL = 45;
const EXTREMES_STEP_MS = 120000;
const EXTREMES_INSTANTS = 7 * DAY_MS / EXTREMES_STEP_MS;
const MIB = 2 ** 20;
const GIB = 2 ** 30;
// COMPLETED: a day of two 2-GPU agents' NVML signals at one a minute, with
// an inventory each: gpu-node has NVML, cpu-node says why it has not. GPU 1's
// memory is full for one sample (the spike of the memory-used share).
const GPU_TRIAL = 46;
// COMPLETED: two hours of four 2-GPU nodes at one sample a minute; node-2's
// GPU 1 stalls (0 %) for one sample.
const NODES_TRIAL = 47;
const NODES = ['node-0', 'node-1', 'node-2', 'node-3'];
const NODES_INSTANTS = 120;
const NODES_STALL = 60;
const GPU_INSTANTS = DAY_MS / STEP_MS;
const GPU_SPIKE = 700;
const GPU_TOTAL = 80 * GIB;
const NVML_GPUS = ['GPU-11111111-2222-3333-4444-555555555555', 'GPU-66666666-7777-8888-9999-000000000000'];
const NVML_SERIES = [
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_util', gpuUuid: gpu, unit: 'percent' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_memory_used', gpuUuid: gpu, unit: 'bytes' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_memory_total', gpuUuid: gpu, unit: 'bytes' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_power', gpuUuid: gpu, unit: 'watts' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_power_limit', gpuUuid: gpu, unit: 'watts' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_temperature', gpuUuid: gpu, unit: 'celsius' })),
  ...NVML_GPUS.map((gpu) => ({ name: 'gpu_sm_clock', gpuUuid: gpu, unit: 'hertz' })),
];
const NVML_FAMILIES = ['gpu_util', 'gpu_memory_used', 'gpu_power', 'gpu_temperature', 'gpu_sm_clock'];
const GPU_INVENTORY = {
  hostName: 'gpu-node', agentVersion: 'metrics-agent 1.0.0',
  cpuModel: 'Intel(R) Xeon(R) Platinum 8480+', cpuSockets: 2, cpuCount: 224,
  memoryTotalBytes: String(2 * 1024 * GIB), driverVersion: '550.54.15', cudaVersion: '12.4',
  gpus: NVML_GPUS.map((uuid, index) => ({ index, uuid, name: 'NVIDIA H100 80GB HBM3',
    memoryTotalBytes: String(GPU_TOTAL), migMode: 'disabled' })),
};
const NO_NVML = 'NVML not available: libnvidia-ml.so.1 not found';

// --- seeded data ------------------------------------------------------------

const SERIES = [
  ...GPUS.map((gpu) => ({ name: 'gpu_util', gpuUuid: gpu, unit: 'percent' })),
  ...GPUS.map((gpu) => ({ name: 'gpu_free_memory', gpuUuid: gpu, unit: 'bytes' })),
  { name: 'cpu_util_simple', gpuUuid: '', unit: 'percent' },
  { name: 'memory_free', gpuUuid: '', unit: 'bytes' },
  { name: 'disk_iops', gpuUuid: '', unit: 'operations/s' },
  { name: 'disk_throughput_read', gpuUuid: '', unit: 'bytes/s' },
  { name: 'disk_throughput_write', gpuUuid: '', unit: 'bytes/s' },
  { name: 'net_throughput_sent', gpuUuid: '', unit: 'bytes/s' },
  { name: 'net_throughput_recv', gpuUuid: '', unit: 'bytes/s' },
];

// A daily wave with deterministic noise, so each bucket's band has a width;
// no value reaches the spike (100, on the first GPU) or LIVE_CPU.
function valuesAt(k) {
  const wave = Math.sin(k / 230);
  const noise = ((k * 2654435761) % 1000) / 1000 - 0.5;
  const swing = wave + noise;
  return [
    ...GPUS.map((_, g) => (k === SPIKE_INDEX && g === 0 ? 100 : 30 + 10 * swing + 4 * g)),
    ...GPUS.map((_, g) => (8 + swing + g) * 2 ** 30),
    40 + 15 * swing,
    (20 + 2 * swing) * 2 ** 30,
    150 + 50 * swing,
    (50 + 10 * swing) * 2 ** 20, (30 + 10 * swing) * 2 ** 20,
    (10 + 3 * swing) * 2 ** 20, (12 + 3 * swing) * 2 ** 20,
  ];
}

// Deterministic noise in [-0.5, 0.5), different for each salt.
function noise(k, salt) {
  return ((k * 2654435761 + salt * 40503) % 1000) / 1000 - 0.5;
}

// The planted extremes: which chart, line and instant, and the value a
// bucket's minimum or maximum must show.
const EXTREMES = [
  { family: 'gpu_free_memory', line: 'GPU 2', k: Math.round(0.6 * EXTREMES_INSTANTS),
    series: GPUS.length + 2, value: 200 * MIB, kind: 'min', legend: /\(200 MiB – / },
  { family: 'gpu_util', line: 'GPU 5', k: Math.round(0.25 * EXTREMES_INSTANTS),
    series: 5, value: 0, kind: 'min', legend: /\(0 – / },
  { family: 'gpu_util', line: 'GPU 1', k: Math.round(0.8 * EXTREMES_INSTANTS),
    series: 1, value: 100, kind: 'max', legend: /– 100%\)/ },
  { family: 'cpu', line: 'CPU utilization', k: Math.round(0.35 * EXTREMES_INSTANTS),
    series: CPU_SERIES, value: 99, kind: 'max', legend: /– 99%\)/ },
  { family: 'network', line: 'Received', k: Math.round(0.45 * EXTREMES_INSTANTS),
    series: CPU_SERIES + 6, value: 400 * MIB, kind: 'max', legend: /– 400 MiB\/s\)/ },
];

function extremesValuesAt(k) {
  const busy = k < EXTREMES_INSTANTS / 2;
  const values = [
    ...GPUS.map((_, g) => (busy ? 86.5 + g + 3 * noise(k, g) : 26 + g + 4 * noise(k, g))),
    ...GPUS.map((_, g) => (12 + 0.5 * g + 0.4 * noise(k, 8 + g)) * GIB),
    40 + 10 * noise(k, 16),
    (20 + noise(k, 17)) * GIB,
    150 + 50 * noise(k, 18),
    (50 + 10 * noise(k, 19)) * MIB, (30 + 10 * noise(k, 20)) * MIB,
    (10 + 2 * noise(k, 21)) * MIB, (12 + 2 * noise(k, 22)) * MIB,
  ];
  for (const e of EXTREMES) if (e.k === k) values[e.series] = e.value;
  return values;
}

// Sends `instants` reports of every series to `trial`, `stepMs` apart from
// `startMs`, their values from valuesOf(k), in batches of 2000.
async function sendReports(server, trial, startMs, instants, stepMs, valuesOf) {
  const indexes = SERIES.map((_, i) => i);
  for (let first = 0; first < instants; first += 2000) {
    const reports = [];
    for (let k = first; k < Math.min(instants, first + 2000); k++) {
      reports.push({ time: new Date(startMs + k * stepMs).toISOString(),
        series: indexes, values: valuesOf(k) });
    }
    await server.call('POST', `/api/v1/trials/${trial}/metrics/system`,
      { batch: { agentId: AGENT, series: SERIES, reports } });
  }
}

async function seedExtremes(server, startMs) {
  await server.call('POST', '/api/v1/trials', { id: EXTREMES_TRIAL });
  await sendReports(server, EXTREMES_TRIAL, startMs, EXTREMES_INSTANTS, EXTREMES_STEP_MS,
    extremesValuesAt);
  await server.call('PATCH', `/api/v1/trials/${EXTREMES_TRIAL}`, { state: 'COMPLETED' });
}

// Where a planted extreme is drawn: its bucket, the value the bucket shows,
// the y range, and how many pixels of its line's own colour lie within
// `near` px of the extreme's place on the canvas, at least `alpha` opaque
// (a dot is opaque; a line not faded is, but for its anti-aliased edge).
function extremeOnCanvas(page, extreme, ms, { near = 2, alpha = 200 } = {}) {
  return page.evaluate(([e, at, near, alpha]) => {
    const chart = window.profiler.charts.get(e.family);
    const u = chart.plot;
    const i = chart.shown.findIndex((l) => l.label.text === e.line);
    const xs = u.data[0];
    const width = Math.max(chart.resolutionMs, 1);
    const j = xs.findIndex((x) => x * 1000 <= at && at < x * 1000 + width);
    const value = u.data[1 + 3 * i + (e.kind === 'max' ? 1 : 2)][j];
    const color = u.series[1 + 3 * i].stroke(u, 1 + 3 * i);
    const want = [1, 3, 5].map((p) => parseInt(color.slice(p, p + 2), 16));
    const x = Math.round(u.valToPos(xs[j], 'x', true));
    const y = Math.round(u.valToPos(value, 'y', true));
    const r = Math.ceil(near * devicePixelRatio);
    const pixels = u.ctx.getImageData(x - r, y - r, 2 * r + 1, 2 * r + 1).data;
    let matches = 0;
    for (let p = 0; p < pixels.length; p += 4) {
      const off = Math.abs(pixels[p] - want[0]) + Math.abs(pixels[p + 1] - want[1]) +
        Math.abs(pixels[p + 2] - want[2]);
      if (pixels[p + 3] > alpha && off < 40) matches += 1;
    }
    return { i, j, value, color, matches, resolutionMs: chart.resolutionMs,
      yMin: u.scales.y.min, yMax: u.scales.y.max,
      left: u.valToPos(xs[j], 'x'), top: u.valToPos(value, 'y'),
      fraction: u.valToPos(xs[j], 'x') / (u.bbox.width / devicePixelRatio) };
  }, [{ family: extreme.family, line: extreme.line, kind: extreme.kind }, ms, near, alpha]);
}

// Hovers bucket `j` of a chart (buckets are about a pixel wide and the
// pointer moves in whole pixels: the pixel whose nearest bucket is `j`),
// then returns the legend entry of `line`: its text, and whether it shows
// whole in its fixed width.
async function hoverLegend(page, family, line, facts) {
  await page.locator(`section[data-family="${family}"]`).scrollIntoViewIfNeeded();
  const over = await page.locator(`section[data-family="${family}"] .u-over`).boundingBox();
  const nearest = Math.round(over.x + facts.left);
  const y = over.y + Math.min(Math.max(facts.top, 5), over.height - 5);
  for (const x of [nearest, nearest - 1, nearest + 1]) {
    await page.mouse.move(x, y);
    const idx = await page.evaluate((id) => new Promise((resolve) => requestAnimationFrame(
      () => resolve(window.profiler.charts.get(id).plot.cursor.idx))), family);
    if (idx === facts.j) break;
  }
  const entry = page.locator(`section[data-family="${family}"] .u-legend .u-series[data-series="${line}"]`);
  return { text: await entry.innerText(),
    whole: await entry.locator('.u-value').evaluate((e) => e.scrollWidth <= e.clientWidth) };
}

function nvmlValuesAt(k) {
  const wave = Math.sin(k / 90);
  return [
    ...NVML_GPUS.map((_, g) => 60 + 20 * wave + g),
    ...NVML_GPUS.map((_, g) => (g === 1 && k === GPU_SPIKE ? GPU_TOTAL : (40 + 10 * wave + g) * GIB)),
    ...NVML_GPUS.map(() => GPU_TOTAL),
    ...NVML_GPUS.map((_, g) => 400 + 150 * wave + 10 * g),
    ...NVML_GPUS.map(() => 700),
    ...NVML_GPUS.map((_, g) => 55 + 10 * wave + g),
    ...NVML_GPUS.map(() => 1.98e9),
  ];
}

async function seedNvml(server, startMs) {
  await server.call('POST', '/api/v1/trials', { id: GPU_TRIAL });
  const indexes = NVML_SERIES.map((_, i) => i);
  const reports = [];
  for (let k = 0; k < GPU_INSTANTS; k++) {
    reports.push({ time: new Date(startMs + k * STEP_MS).toISOString(), series: indexes,
      values: nvmlValuesAt(k) });
  }
  await server.call('POST', `/api/v1/trials/${GPU_TRIAL}/metrics/system`,
    { batch: { agentId: 'gpu-node', series: NVML_SERIES, reports, inventory: GPU_INVENTORY } });
  await server.call('POST', `/api/v1/trials/${GPU_TRIAL}/metrics/system`, {
    batch: { agentId: 'cpu-node', series: [SERIES[CPU_SERIES],
      { name: 'cgroup_cpu_util', unit: 'percent' }, { name: 'process_cpu_util', unit: 'percent' },
      { name: 'cgroup_memory_used', unit: 'bytes' }, { name: 'cgroup_memory_limit', unit: 'bytes' }],
      reports: [0, 1, 2].map((k) => ({ time: new Date(startMs + k * STEP_MS).toISOString(),
        series: [0, 1, 2, 3, 4], values: [20 + k, 90 + k, 700 + k, (3 + k) * GIB, 8 * GIB] })),
      inventory: { hostName: 'cpu-node', agentVersion: 'metrics-agent 1.0.0', cpuCount: 8,
        gpuStatus: NO_NVML } },
  });
  await server.call('PATCH', `/api/v1/trials/${GPU_TRIAL}`, { state: 'COMPLETED' });
}

async function seedNodes(server, startMs) {
  await server.call('POST', '/api/v1/trials', { id: NODES_TRIAL });
  for (const [n, agent] of NODES.entries()) {
    const reports = [];
    for (let k = 0; k < NODES_INSTANTS; k++) {
      const gpu = (g) => (n === 2 && g === 1 && k === NODES_STALL ? 0 : 70 + 10 * noise(k, 4 * n + g));
      reports.push({ time: new Date(startMs + k * STEP_MS + n * 1000).toISOString(),
        values: [40 + 10 * noise(k, 30 + n), gpu(0), gpu(1)] });
    }
    await server.call('POST', `/api/v1/trials/${NODES_TRIAL}/metrics/system`, {
      batch: { agentId: agent, reports, series: [SERIES[CPU_SERIES],
        { name: 'gpu_util', gpuUuid: `GPU-${agent}-0`, unit: 'percent' },
        { name: 'gpu_util', gpuUuid: `GPU-${agent}-1`, unit: 'percent' }] },
    });
  }
  await server.call('PATCH', `/api/v1/trials/${NODES_TRIAL}`, { state: 'COMPLETED' });
}

async function seed(server, startMs) {
  await server.call('POST', '/api/v1/trials', { id: DONE_TRIAL });
  await server.call('POST', '/api/v1/trials', { id: RUN_TRIAL });
  await sendReports(server, RUN_TRIAL, startMs, 7 * DAY_MS / STEP_MS, STEP_MS, valuesAt);
  await server.call('POST', `/api/v1/trials/${DONE_TRIAL}/metrics/system`, {
    batch: { agentId: AGENT, series: [SERIES[CPU_SERIES]],
      reports: [{ time: new Date(startMs).toISOString(), series: [0], values: [12] }] },
  });
  await server.call('PATCH', `/api/v1/trials/${DONE_TRIAL}`, { state: 'COMPLETED' });
  await server.call('POST', '/api/v1/trials', { id: FRESH_TRIAL });
  const now = Math.floor(Date.now() / 1000) * 1000;
  await sendReports(server, FRESH_TRIAL, now - 29000, 30, 1000, (k) => valuesAt(k * 37));
  await seedExtremes(server, startMs);
  await seedNvml(server, startMs);
  await seedNodes(server, startMs);
  await server.call('POST', '/api/v1/trials', { id: STALE_TRIAL });
  for (const [agent, ageMs] of [['agent-gone', 3600000], ['agent-live', 0]]) {
    await server.call('POST', `/api/v1/trials/${STALE_TRIAL}/metrics/system`, {
      batch: { agentId: agent, series: [SERIES[2 * GPUS.length]],
        reports: [{ time: new Date(Date.now() - ageMs).toISOString(), series: [0], values: [5] }] },
    });
  }
}

// --- the page ---------------------------------------------------------------

// Chart facts read from the page's own uPlot instances.
function chartFacts(page, family) {
  return page.evaluate((id) => {
    const chart = window.profiler.charts.get(id);
    return { resolutionMs: chart.resolutionMs, xs: chart.plot.data[0],
      seriesCount: chart.plot.data.length - 1 };
  }, family);
}

async function dragAcross(page, family, fromFraction, toFraction) {
  await page.locator(`section[data-family="${family}"]`).scrollIntoViewIfNeeded();
  const box = await page.locator(`section[data-family="${family}"] .u-over`).boundingBox();
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width * fromFraction, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * toFraction, y, { steps: 8 });
  await page.mouse.up();
}

async function allChartsReady(page) {
  for (const family of FAMILIES) {
    await page.locator(`section[data-family="${family}"][data-state="ready"]`)
      .waitFor({ timeout: 15000 });
  }
}

describe('profiler page', { timeout: 180000 }, () => {
  const server = new Metricsd({ metricsd: metricsdPath, metricsctl: metricsctlPath,
    name: 'profiler_page_test', args: ['--web-root', webRoot,
      '--grafana-url', 'http://grafana.example:3000', '--stale-after', STALE_AFTER] });
  let context;
  let page;
  let userDataDir;
  let runStartMs;
  const requests = [];
  const pageErrors = [];
  let viewerToken;

  before(async () => {
    mkdirSync(artifactDir, { recursive: true });
    await server.start();
    runStartMs = Math.floor((Date.now() - 7 * DAY_MS - 5 * STEP_MS) / STEP_MS) * STEP_MS;
    const seeded = Date.now();
    await seed(server, runStartMs);
    console.log(`seeded ${7 * DAY_MS / STEP_MS * SERIES.length} values in ${Date.now() - seeded} ms`);
    userDataDir = mkdtempSync(path.join(os.tmpdir(), 'profiler-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = context.pages()[0] || await context.newPage();
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => pageErrors.push(e.message));
  });

  after(async () => {
    // The page as the last step left it: what to look at when one failed.
    if (page) {
      // A page that is already gone must not stop the clean-up below.
      await page.screenshot({ path: path.join(artifactDir, 'profiler_page_last.png') })
        .catch(() => {});
    }
    if (context) await context.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    await server.stop();
    server.dropDatabase();
  });

  it('asks for a token, refuses a wrong one, and takes one from the address', async () => {
    await page.goto(`${server.base}/`);
    await page.locator('form.sign-in #token').waitFor({ timeout: 10000 });
    assert.equal(await page.locator('#sign-in-error').count(), 0);
    await page.fill('#token', 'mtk_not-a-token');
    await page.click('form.sign-in button[type="submit"]');
    await page.locator('#sign-in-error').waitFor({ timeout: 10000 });
    assert.match(await page.locator('#sign-in-error').innerText(), /did not accept/);

    viewerToken = server.createToken('viewer');
    await page.goto(`${server.base}/#token=${viewerToken}`);
    await page.locator('tr[data-trial-id]').first().waitFor({ timeout: 10000 });
    assert.equal(page.url(), `${server.base}/#/`);  // the token left the address bar
    assert.equal(await page.evaluate(() => sessionStorage.getItem('metricsd.token')),
      viewerToken);
    assert.equal(await page.locator('#sign-out').isVisible(), true);
  });

  it('lists the trials with their state', async () => {
    await page.goto(`${server.base}/`);
    const running = page.locator(`tr[data-trial-id="${RUN_TRIAL}"]`);
    await running.waitFor({ timeout: 10000 });
    assert.match(await running.innerText(), /Trial 42\s+ACTIVE/);
    assert.match(await page.locator(`tr[data-trial-id="${DONE_TRIAL}"]`).innerText(),
      /Trial 41\s+COMPLETED/);
    const ids = await page.locator('tr[data-trial-id]').evaluateAll(
      (rows) => rows.map((r) => Number(r.dataset.trialId)));
    assert.deepEqual(ids, [NODES_TRIAL, GPU_TRIAL, EXTREMES_TRIAL, FRESH_TRIAL, STALE_TRIAL, RUN_TRIAL,
      DONE_TRIAL]);  // newest first
    // How many of an ACTIVE trial's agents are stale, and the last sample.
    assert.match(await running.innerText(), /\b1 agent\s+[A-Z][a-z]{2} \d+, \d\d:\d\d:\d\d/);
    const stale = page.locator(`tr[data-trial-id="${STALE_TRIAL}"]`);
    assert.match(await stale.innerText(), /1 of 2 agents stale/);
    assert.equal(await stale.getAttribute('data-stale-agents'), '1');
  });

  it('draws every chart with data, with the agent, GPUs and Grafana link', async () => {
    await page.click(`a[href="#/trials/${RUN_TRIAL}"]`);
    await allChartsReady(page);
    for (const family of FAMILIES) {
      const section = page.locator(`section[data-family="${family}"]`);
      assert.ok(Number(await section.getAttribute('data-points')) > 100, family);
      assert.equal(await section.locator('canvas').count(), 1, family);
    }
    assert.deepEqual(await page.locator('section.chart').evaluateAll(
      (s) => s.map((e) => e.dataset.family)), FAMILIES);
    assert.deepEqual(await page.locator('#gpu option').allInnerTexts(),
      ['All (8)', ...GPUS.map((_, i) => `GPU ${i}`)]);
    assert.equal(await page.locator('#agent').inputValue(), AGENT);
    assert.equal(await page.locator('#grafana').getAttribute('href'),
      `http://grafana.example:3000/d/metricsd-profiler/profiler?var-trial_id=${RUN_TRIAL}`);
    // Units in the legends, as a user hovering a chart reads them (the
    // cursor is synchronised, so every chart's legend follows it).
    const over = await page.locator('section[data-family="cpu"] .u-over').boundingBox();
    await page.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
    const legendOf = (family) => page.locator(
      `section[data-family="${family}"] .u-legend .u-series`).nth(1).innerText();
    assert.match(await legendOf('cpu'), /\d%/);
    assert.match(await legendOf('memory'), /\d GiB/);
    assert.match(await legendOf('network'), /\d MiB\/s/);
    assert.match(await legendOf('gpu_free_memory'), /GPU 0[\s\S]*\d GiB/);
    // Every axis carries its unit: disk IOPS names its axis.
    assert.equal(await page.evaluate(() => window.profiler.charts.get('disk_iops').plot.axes[1].label),
      'operations/s');
    const gpu = await chartFacts(page, 'gpu_util');
    assert.equal(gpu.seriesCount, 3 * GPUS.length);  // mean, max, min each
  });

  it('names 8 GPUs by index with the UUID on hover, in a compact legend that highlights one', async () => {
    const legend = page.locator('section[data-family="gpu_util"] .u-legend');
    const rows = legend.locator('.u-series[data-series]');
    assert.deepEqual(await rows.evaluateAll((r) => r.map((e) => e.dataset.series)),
      GPUS.map((_, i) => `GPU ${i}`));
    assert.deepEqual(await rows.evaluateAll((r) => r.map((e) => e.title)), GPUS);
    assert.deepEqual(await page.locator('#gpu option').evaluateAll((o) => o.slice(1).map((e) => e.title)),
      GPUS);
    // Compact: the time row and two rows of GPUs, well under the plot's
    // height; hovering (values change) moves no chart.
    const legendBox = await legend.boundingBox();
    assert.ok(legendBox.height < 90, `a legend ${legendBox.height} px tall`);
    const tops = () => page.locator('section.chart').evaluateAll(
      (e) => e.map((x) => `${x.getBoundingClientRect().top}/${x.getBoundingClientRect().height}`));
    const before = await tops();
    const over = await page.locator('section[data-family="gpu_util"] .u-over').boundingBox();
    await page.mouse.move(over.x + over.width * 0.3, over.y + over.height / 2);
    assert.deepEqual(await tops(), before);

    // Hovering GPU 3's entry highlights it in both GPU charts: its band is
    // drawn, the other lines fade and have none.
    const strokes = (family) => page.evaluate((id) => {
      const chart = window.profiler.charts.get(id);
      return { highlight: chart.element.dataset.highlight,
        band: chart.shown.map((_, i) => chart.bandShown(i)),
        faded: chart.shown.map((_, i) => chart.faded(i)),
        colors: chart.shown.map((_, i) => chart.plot.series[1 + 3 * i].stroke(chart.plot, 1 + 3 * i)) };
    }, family);
    await rows.nth(3).hover();
    for (const family of ['gpu_util', 'gpu_free_memory']) {
      const facts = await strokes(family);
      assert.equal(facts.highlight, 'GPU 3', family);
      assert.deepEqual(facts.band, GPUS.map((_, i) => i === 3), family);
      assert.deepEqual(facts.faded, GPUS.map((_, i) => i !== 3), family);
    }
    // A click keeps it when the pointer leaves; a second click releases it.
    await rows.nth(3).click();
    await page.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
    assert.equal((await strokes('gpu_util')).highlight, 'GPU 3');
    assert.equal(await rows.count(), GPUS.length, 'the click hid no line');
    await rows.nth(3).click();
    await page.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
    const released = await strokes('gpu_util');
    assert.equal(released.highlight, '');
    assert.deepEqual(released.band, GPUS.map(() => false));

    // One colour per GPU: GPU 3 alone keeps the colour it had among eight.
    await page.selectOption('#gpu', GPUS[3]);
    await page.waitForFunction(() => window.profiler.charts.get('gpu_util')?.shown.length === 1);
    await allChartsReady(page);
    const alone = await strokes('gpu_util');
    assert.equal(alone.colors[0], released.colors[3]);
    assert.deepEqual(alone.band, [true], 'a single GPU shows its band');
    await page.selectOption('#gpu', '');
    await page.waitForFunction((n) => window.profiler.charts.get('gpu_util')?.shown.length === n,
      GPUS.length);
    await allChartsReady(page);
  });

  it('labels time one way everywhere, ticks never overlapping', async () => {
    const clock = '[A-Z][a-z]{2} \\d+, \\d\\d:\\d\\d:\\d\\d';
    assert.match(await page.locator('.controls .window').innerText(),
      new RegExp(`^${clock} – ${clock} \\(7(\\.\\d+)? d\\)$`));
    const over = await page.locator('section[data-family="cpu"] .u-over').boundingBox();
    await page.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
    assert.match(await page.locator('section[data-family="cpu"] .u-legend .u-series.time').innerText(),
      new RegExp(clock));
    for (const family of FAMILIES) {
      const ticks = await page.evaluate((id) => {
        const u = window.profiler.charts.get(id).plot;
        const axis = u.axes[0];
        u.ctx.font = axis.font[0];
        return axis._values.map((text, i) => ({ text,
          x: u.valToPos(axis._splits[i], 'x'),
          width: Math.max(...String(text).split('\n').map((l) => u.ctx.measureText(l).width))
            / devicePixelRatio }));
      }, family);
      assert.ok(ticks.length >= 3, `${family}: ${ticks.length} time ticks`);
      for (let i = 1; i < ticks.length; i++) {
        const room = ticks[i].x - ticks[i - 1].x;
        assert.ok(room >= (ticks[i].width + ticks[i - 1].width) / 2 + 4,
          `${family}: "${ticks[i - 1].text}" and "${ticks[i].text}" ${room} px apart`);
      }
    }
  });

  it('shows the one-sample spike of a 7-day run as its bucket\'s maximum', async () => {
    // Its GPU alone: the legend shows the bucket's range then.
    await page.selectOption('#gpu', GPUS[0]);
    await page.waitForFunction(() => window.profiler.charts.get('gpu_util')?.shown.length === 1);
    await allChartsReady(page);
    const spikeMs = runStartMs + SPIKE_INDEX * STEP_MS;
    const spike = await page.evaluate((ms) => {
      const chart = window.profiler.charts.get('gpu_util');
      const u = chart.plot;
      const i = u.data[0].findIndex((x) => x * 1000 <= ms && ms < x * 1000 + chart.resolutionMs);
      return { i, resolutionMs: chart.resolutionMs, mean: u.data[1][i], max: u.data[2][i],
        left: u.valToPos(u.data[0][i], 'x'), top: u.valToPos(100, 'y') };
    }, spikeMs);
    assert.ok(spike.resolutionMs >= 5 * STEP_MS, `buckets of ${spike.resolutionMs} ms`);
    assert.equal(spike.max, 100);
    assert.ok(spike.mean < 80, `mean ${spike.mean}: the bucket holds other samples`);
    // Hovering the bucket shows the spike in the legend, as a user sees it.
    const legend = await hoverLegend(page, 'gpu_util', 'GPU 0',
      { left: spike.left, top: spike.top + 5, j: spike.i });
    assert.match(legend.text, /– 100%\)/);
    await page.selectOption('#gpu', '');
    await page.waitForFunction((n) => window.profiler.charts.get('gpu_util')?.shown.length === n,
      GPUS.length);
    await allChartsReady(page);
  });

  it('refetches finer data on zoom, down to raw points, and resets', async () => {
    const whole = await chartFacts(page, 'gpu_util');
    const before = requests.length;
    await dragAcross(page, 'gpu_util', 0.45, 0.55);
    await page.locator('#reset-zoom').waitFor({ state: 'visible' });
    await page.waitForFunction((ms) => window.profiler.charts.get('gpu_util')
      && window.profiler.charts.get('gpu_util').resolutionMs < ms, whole.resolutionMs);
    await allChartsReady(page);
    const zoomed = await chartFacts(page, 'gpu_util');
    const refetches = requests.slice(before).filter((u) => u.includes('/metrics/system?'));
    assert.equal(refetches.length, 1, 'one request for all charts');
    const query = new URL(refetches[0]).searchParams;
    const windowMs = Date.parse(query.get('end')) - Date.parse(query.get('start'));
    assert.ok(windowMs < 0.12 * 7 * DAY_MS && windowMs > 0.08 * 7 * DAY_MS, `${windowMs} ms`);
    assert.ok(zoomed.xs[0] * 1000 >= Date.parse(query.get('start')) - zoomed.resolutionMs);
    console.log(`zoom: ${whole.resolutionMs} ms buckets -> ${zoomed.resolutionMs} ms`);
    // The y axis fits the zoomed window's data (free memory around 20 GiB
    // is not drawn on a 0-based axis); percentages keep 0-100 %.
    const y = await page.evaluate(() => {
      const u = window.profiler.charts.get('memory').plot;
      const values = [...u.data[2], ...u.data[3]].filter((v) => v !== null);
      return { min: u.scales.y.min, max: u.scales.y.max,
        dataMin: Math.min(...values), dataMax: Math.max(...values),
        cpu: [window.profiler.charts.get('cpu').plot.scales.y.min,
          window.profiler.charts.get('cpu').plot.scales.y.max] };
    });
    assert.ok(y.min <= y.dataMin && y.max >= y.dataMax, JSON.stringify(y));
    assert.ok(y.max - y.min <= 1.3 * (y.dataMax - y.dataMin), JSON.stringify(y));
    assert.ok(y.min > 0, JSON.stringify(y));
    assert.deepEqual(y.cpu, [0, 100]);

    await dragAcross(page, 'cpu', 0.40, 0.42);
    await page.waitForFunction(() => window.profiler.charts.get('cpu')
      && window.profiler.charts.get('cpu').resolutionMs === 0);
    await allChartsReady(page);
    assert.equal(await page.locator('section[data-family="cpu"] .chart-detail').innerText(),
      'raw points');
    const raw = await chartFacts(page, 'cpu');
    const gaps = raw.xs.slice(1).map((x, i) => Math.round((x - raw.xs[i]) * 1000));
    assert.ok(raw.xs.length >= 5, `${raw.xs.length} raw points`);
    assert.ok(gaps.every((g) => g === STEP_MS), `gaps ${gaps}`);
    // A raw point on hover is one value, not "552 (552 – 552)".
    const cpuOver = await page.locator('section[data-family="cpu"] .u-over').boundingBox();
    await page.mouse.move(cpuOver.x + cpuOver.width / 2, cpuOver.y + cpuOver.height / 2);
    assert.match(await page.locator('section[data-family="cpu"] .u-legend .u-series').nth(1)
      .innerText(), /^CPU utilization\s+\d+(\.\d+)?%$/);

    // The downloads hold the window on screen: its raw samples as CSV, its
    // chart as a trace.
    const shown = await page.evaluate(() => window.profiler.zoom);
    const [csvDownload] = await Promise.all([page.waitForEvent('download'),
      page.click('#download-csv')]);
    assert.equal(csvDownload.suggestedFilename(), `trial-${RUN_TRIAL}-system-metrics.csv`);
    const csv = readFileSync(await csvDownload.path(), 'utf8').trim().split('\n');
    assert.equal(csv[0], 'time,agent_id,gpu_index,gpu_uuid,name,unit,value');
    assert.ok(csv.length > 1, 'samples in the window');
    for (const line of csv.slice(1)) {
      const [time, agent] = line.split(',');
      const ms = Date.parse(time);
      assert.equal(agent, AGENT);
      assert.ok(ms >= shown.startMs && ms < shown.endMs, `${time} outside the window`);
    }
    await page.locator('#download-status').filter({ hasText: 'Saved' }).waitFor();
    const [traceDownload] = await Promise.all([page.waitForEvent('download'),
      page.click('#download-trace')]);
    const trace = JSON.parse(readFileSync(await traceDownload.path(), 'utf8'));
    assert.equal(trace.baseTimeNanoseconds, 0);
    const counters = trace.traceEvents.filter((e) => e.ph === 'C');
    assert.ok(counters.length > 0);
    assert.ok(counters.every((e) => e.ts >= shown.startMs * 1000 && e.ts < shown.endMs * 1000));
    console.log(`downloads of the zoomed window: ${csv.length - 1} CSV lines, ` +
      `${counters.length} trace counters`);

    await page.click('#reset-zoom');
    await page.waitForFunction((ms) => window.profiler.charts.get('gpu_util')
      && window.profiler.charts.get('gpu_util').resolutionMs === ms, whole.resolutionMs);
    assert.equal(await page.locator('#reset-zoom').isVisible(), false);
  });

  it('shows a new sample live within seconds, then stops when the trial ends', async () => {
    await page.waitForFunction(() => /updated/.test(document.getElementById('live').textContent),
      null, { timeout: 10000 });
    // The follow starts from what the page has drawn, its newest bucket at
    // its resolution, so its first message is not the whole week again.
    const follow = new URL(requests.filter(
      (u) => u.includes(`/trials/${RUN_TRIAL}/metrics/system/follow?`)).at(-1));
    const drawn = await page.evaluate(() => {
      const chart = window.profiler.charts.get('cpu');
      return { resolutionMs: chart.resolutionMs, lastMs: Math.max(...chart.plot.data[0]) * 1000 };
    });
    assert.equal(Number(follow.searchParams.get('resolutionUs')), drawn.resolutionMs * 1000);
    const followStart = Date.parse(follow.searchParams.get('start'));
    assert.ok(followStart >= drawn.lastMs - drawn.resolutionMs && followStart <= drawn.lastMs,
      `the follow starts at ${followStart}, the newest drawn bucket at ${drawn.lastMs}`);
    const sent = Date.now();
    await server.call('POST', `/api/v1/trials/${RUN_TRIAL}/metrics/system`, {
      batch: { agentId: AGENT, series: [SERIES[CPU_SERIES]],
        reports: [{ time: new Date(sent).toISOString(), series: [0], values: [LIVE_CPU] }] },
    });
    await page.waitForFunction((v) => window.profiler.charts.get('cpu').plot.data[2].includes(v),
      LIVE_CPU, { timeout: 5000 });
    console.log(`live: the new sample was charted ${Date.now() - sent} ms after it was sent`);
    // Drawn, as every extreme is: the canvas has the line's colour at its
    // value, as a whisker's dot or, when it is its bucket's only sample, the
    // end of the line itself (whose edge is anti-aliased).
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(resolve)));
    const live = await extremeOnCanvas(page,
      { family: 'cpu', line: 'CPU utilization', kind: 'max' }, sent, { near: 3, alpha: 100 });
    assert.equal(live.value, LIVE_CPU);
    assert.ok(live.matches >= 3, `live: ${JSON.stringify(live)}`);
    // The header's window follows live data.
    assert.ok(Number(await page.locator('.controls .window').getAttribute('data-end-ms')) >= sent);
    await page.screenshot({ path: path.join(artifactDir, 'profiler_page.png'), fullPage: true });

    await server.call('PATCH', `/api/v1/trials/${RUN_TRIAL}`, { state: 'COMPLETED' });
    await page.locator('#live[data-status="ended"]').waitFor({ timeout: 10000 });
    assert.equal(await page.locator('#trial-state').innerText(), 'COMPLETED');
  });

  it('shows a one-sample trial in a window of minutes around its point', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, DONE_TRIAL);
    await page.waitForFunction(() => {
      const chart = window.profiler.charts.get('cpu');
      return chart && chart.plot && chart.plot.data[0].length === 1;
    }, null, { timeout: 15000 });
    const x = await page.evaluate(() => {
      const u = window.profiler.charts.get('cpu').plot;
      return { min: u.scales.x.min, max: u.scales.x.max, point: u.data[0][0],
        left: u.valToPos(u.data[0][0], 'x'), width: u.bbox.width / devicePixelRatio };
    });
    assert.ok(x.max - x.min <= 600, `an x axis ${x.max - x.min} s wide for one point`);
    assert.ok(x.min < x.point && x.point < x.max, `the point ${x.point} is outside [${x.min}, ${x.max}]`);
    assert.ok(x.left > x.width / 4 && x.left < (x.width * 3) / 4,
      `the point is drawn ${x.left} px into a ${x.width} px wide plot`);
  });

  it('shows a fresh trial\'s first seconds as raw points on an axis of seconds', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, FRESH_TRIAL);
    await page.waitForFunction((n) => window.profiler && window.profiler.trialId === n &&
      window.profiler.charts.size === 7, FRESH_TRIAL);
    await allChartsReady(page);
    const facts = await chartFacts(page, 'gpu_util');
    assert.equal(facts.resolutionMs, 0);
    assert.equal(facts.xs.length, 30);
    const ticks = await page.evaluate(() => window.profiler.charts.get('cpu').plot.axes[0]._values);
    assert.ok(ticks.every((t) => /^\d\d:\d\d:\d\d/.test(t)), `ticks ${ticks}`);
    await page.screenshot({ path: path.join(artifactDir, 'profiler_page_fresh.png'), fullPage: true });
  });

  it('marks an agent that stopped reporting as stale, with its last sample time', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, STALE_TRIAL);
    await page.locator('section[data-family="cpu"][data-state="ready"]').waitFor({ timeout: 15000 });
    assert.deepEqual(await page.locator('#agent option').allInnerTexts(),
      ['agent-gone (stale)', 'agent-live']);
    const status = page.locator('#agent-status');
    assert.equal(await status.getAttribute('data-stale'), 'true');
    assert.match(await status.innerText(),
      /^Stale: no samples from agent-gone since [A-Z][a-z]{2} \d+, \d\d:\d\d:\d\d \(60 min ago\)/);
    await page.locator('#live[data-status="stale"]').waitFor({ timeout: 10000 });
    assert.doesNotMatch(await page.locator('#live').innerText(), /updated/);
    await page.selectOption('#agent', 'agent-live');
    await page.waitForFunction(() => document.getElementById('agent-status').dataset.stale === 'false');
    assert.match(await status.innerText(), /^Last sample [A-Z][a-z]{2} \d+, /);
  });

  it('draws every planted extreme of 8 GPUs in the default view, in its GPU\'s colour', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, EXTREMES_TRIAL);
    await page.waitForFunction((n) => window.profiler && window.profiler.trialId === n &&
      window.profiler.charts.size === 7, EXTREMES_TRIAL);
    await allChartsReady(page);
    assert.equal(await page.locator('#gpu').inputValue(), '', 'all 8 GPUs');
    await page.mouse.move(0, 0);
    for (const family of ['gpu_free_memory', 'gpu_util']) {
      await page.locator(`section[data-family="${family}"]`).screenshot(
        { path: path.join(artifactDir, `extremes_${family}.png`) });
    }
    const startMs = runStartMs;
    for (const e of EXTREMES) {
      const ms = startMs + e.k * EXTREMES_STEP_MS;
      const facts = await extremeOnCanvas(page, e, ms);
      const what = `${e.family} ${e.line} ${e.kind} at k=${e.k}: ${JSON.stringify(facts)}`;
      assert.ok(facts.i >= 0 && facts.j >= 0, what);
      assert.ok(facts.resolutionMs >= 5 * EXTREMES_STEP_MS, what);  // buckets of many samples
      assert.ok(Math.abs(facts.value - e.value) <= 1e-5 * e.value, what);
      assert.ok(facts.yMin <= e.value && e.value <= facts.yMax, `y range: ${what}`);
      assert.ok(facts.matches >= 3, `not drawn in ${facts.color}: ${what}`);
      const legend = await hoverLegend(page, e.family, e.line, facts);
      if (e === EXTREMES[0]) {
        await page.locator(`section[data-family="${e.family}"]`).screenshot(
          { path: path.join(artifactDir, `extremes_${e.family}_hover.png`) });
      }
      assert.match(legend.text, e.legend, what);
      assert.ok(legend.whole, `the legend cuts "${legend.text}"`);
    }
    // Readable: the noise of eight GPUs between 85 % and 95 % draws no
    // whisker; only the two planted extremes leave their lines.
    const drawn = await page.evaluate(() => ['gpu_util', 'gpu_free_memory', 'cpu', 'network']
      .map((id) => window.profiler.charts.get(id).element.dataset.extremes));
    assert.deepEqual(drawn, ['2', '1', '1', '1']);

    // One GPU alone, then zoomed around the dip: still drawn in GPU 2's colour.
    const dip = EXTREMES[0];
    const dipMs = startMs + dip.k * EXTREMES_STEP_MS;
    const among8 = await extremeOnCanvas(page, dip, dipMs);
    await page.selectOption('#gpu', GPUS[2]);
    await page.waitForFunction(() => window.profiler.charts.get('gpu_free_memory')?.shown.length === 1);
    await allChartsReady(page);
    const alone = await extremeOnCanvas(page, dip, dipMs);
    assert.equal(alone.color, among8.color);
    assert.ok(alone.matches >= 3, `GPU 2 alone: ${JSON.stringify(alone)}`);
    await page.selectOption('#gpu', '');
    await page.waitForFunction((n) => window.profiler.charts.get('gpu_free_memory')?.shown.length === n,
      GPUS.length);
    await allChartsReady(page);
    const whole = await chartFacts(page, 'gpu_free_memory');
    await dragAcross(page, 'gpu_free_memory', among8.fraction - 0.02, among8.fraction + 0.02);
    await page.waitForFunction((ms) => window.profiler.charts.get('gpu_free_memory')
      && window.profiler.charts.get('gpu_free_memory').resolutionMs < ms, whole.resolutionMs);
    await allChartsReady(page);
    const zoomed = await extremeOnCanvas(page, dip, dipMs);
    assert.ok(zoomed.matches >= 3, `zoomed: ${JSON.stringify(zoomed)}`);
    assert.ok(zoomed.yMin <= dip.value, `zoomed: ${JSON.stringify(zoomed)}`);
    await page.click('#reset-zoom');
  });

  it('charts the GPU\'s other signals in a folding group, with the hardware or why there are no GPUs', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, GPU_TRIAL);
    await page.waitForFunction((n) => window.profiler && window.profiler.trialId === n &&
      window.profiler.charts.size > 0, GPU_TRIAL);
    assert.equal(await page.locator('#agent').inputValue(), 'cpu-node');
    // An agent without NVML: its own sentence where the GPU charts would be.
    await page.locator('section[data-family="cpu"][data-state="ready"]').waitFor({ timeout: 15000 });
    assert.equal(await page.locator('#no-gpus').innerText(),
      `No GPU charts for cpu-node: ${NO_NVML}.`);
    assert.equal(await page.locator('#hardware').innerText(), 'Hardware: 1 × CPU, 8 threads');
    // Its job's share: CPU of its cgroup and processes, memory under the cgroup's limit.
    for (const family of ['job_cpu', 'job_memory']) {
      await page.locator(`section[data-family="${family}"][data-state="ready"]`)
        .waitFor({ timeout: 15000 });
    }
    assert.equal(await page.locator('section[data-family="job_memory"]')
      .getAttribute('data-references'), '8 GiB');
    assert.deepEqual(await page.evaluate(() => window.profiler.charts.get('job_cpu').shown
      .map((l) => l.label.text)), ['cgroup (of the CPUs it may use)', 'processes (100% = one CPU)']);

    await page.selectOption('#agent', 'gpu-node');
    for (const family of NVML_FAMILIES) {
      await page.locator(`section[data-family="${family}"][data-state="ready"]`)
        .waitFor({ timeout: 15000 });
    }
    assert.equal(await page.locator('#no-gpus').count(), 0);
    assert.equal(await page.locator('#hardware').innerText(),
      'Hardware: 2 × NVIDIA H100 80GB HBM3 (driver 550.54.15, CUDA 12.4); ' +
      '2 × Intel(R) Xeon(R) Platinum 8480+, 224 threads; 2 TiB');
    // GPU utilization first, the other signals folded together after it.
    assert.deepEqual(await page.locator('.charts > section.chart').evaluateAll(
      (s) => s.map((e) => e.dataset.family)), ['gpu_util']);
    const group = page.locator('details.family-group[data-group="gpu_more"]');
    assert.equal(await group.locator('summary').innerText(), 'More GPU signals');
    assert.deepEqual(await group.locator('section.chart').evaluateAll(
      (s) => s.map((e) => e.dataset.family)), NVML_FAMILIES.slice(1));
    // The power limit is a dashed level, not a line; units in the legends.
    const power = page.locator('section[data-family="gpu_power"]');
    assert.equal(await power.getAttribute('data-references'), '700 W');
    const powerFacts = await page.evaluate(() => {
      const chart = window.profiler.charts.get('gpu_power');
      return { lines: chart.shown.map((l) => l.series.name), yMax: chart.plot.scales.y.max };
    });
    assert.deepEqual(powerFacts.lines, ['gpu_power', 'gpu_power']);
    assert.ok(powerFacts.yMax >= 700, `the limit is in view: ${powerFacts.yMax}`);
    await power.screenshot({ path: path.join(artifactDir, 'profiler_page_power.png') });
    const legends = await page.evaluate(() => ['gpu_power', 'gpu_temperature', 'gpu_sm_clock']
      .map((id) => window.profiler.charts.get(id).plot.series[1].value(
        window.profiler.charts.get(id).plot, window.profiler.charts.get(id).plot.data[1][0], 1, 0)));
    assert.match(legends[0], / W\b/);
    assert.match(legends[1], / °C\b/);
    assert.match(legends[2], /^1\.98 GHz$/);
    // Memory used as a share of total, exact: GPU 1's one full sample is its
    // bucket's maximum, 100 %.
    const share = await page.evaluate((spikeMs) => {
      const chart = window.profiler.charts.get('gpu_memory_used');
      const u = chart.plot;
      const i = chart.shown.findIndex((l) => l.label.text === 'GPU 1');
      const xs = u.data[0];
      const width = Math.max(chart.resolutionMs, 1);
      const j = xs.findIndex((x) => x * 1000 <= spikeMs && spikeMs < x * 1000 + width);
      const means = u.data[1 + 3 * i].filter((v) => v !== null);
      return { unit: chart.unit, max: u.data[2 + 3 * i][j], resolutionMs: chart.resolutionMs,
        lowest: Math.min(...means), highest: Math.max(...means) };
    }, runStartMs + GPU_SPIKE * STEP_MS);
    assert.equal(share.unit, 'percent');
    assert.ok(share.resolutionMs > STEP_MS, `buckets of many samples: ${share.resolutionMs}`);
    assert.equal(share.max, 100);
    // Means of 31 to 51 GiB of 80 GiB; the spike lifts its own bucket's mean only.
    assert.ok(share.lowest >= (100 * 31) / 80 - 1e-9 && share.highest < share.max, JSON.stringify(share));
    // Folding the group is remembered.
    await group.locator('summary').click();
    assert.equal(await group.evaluate((d) => d.open), false);
    await page.reload();
    await page.selectOption('#agent', 'gpu-node');
    await page.locator('section[data-family="gpu_util"][data-state="ready"]').waitFor({ timeout: 15000 });
    assert.equal(await page.locator('details.family-group').evaluate((d) => d.open), false);
    await page.locator('details.family-group summary').click();
    assert.equal(await page.locator('details.family-group').evaluate((d) => d.open), true);
  });

  it('shows every agent of a trial at once, a stalled GPU in its node\'s minimum, a click opening the node', async () => {
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, NODES_TRIAL);
    await page.locator('#all-agents').click();
    await page.waitForFunction((id) => location.hash === `#/trials/${id}/nodes`, NODES_TRIAL);
    for (const family of ['gpu_util', 'cpu']) {
      await page.locator(`section[data-family="${family}"][data-state="ready"]`).waitFor({ timeout: 15000 });
    }
    const lines = await page.evaluate(() => {
      const chart = window.profiler.charts.get('gpu_util');
      return chart.shown.map((line, i) => ({ label: line.label.text,
        lowest: Math.min(...chart.plot.data[3 + 3 * i].filter((v) => v !== null)) }));
    });
    assert.deepEqual(lines.map((l) => l.label), NODES);
    for (const line of lines) {
      assert.equal(line.lowest === 0, line.label === 'node-2', JSON.stringify(line));
    }
    // The stall is a whisker leaving node-2's line.
    assert.ok(Number(await page.locator('section[data-family="gpu_util"]')
      .getAttribute('data-extremes')) >= 1);
    await page.screenshot({ path: path.join(artifactDir, 'all_agents.png') });
    // One GPU of each node: GPU 0 never stalled.
    await page.selectOption('#gpu-index', '0');
    await page.waitForFunction(() => {
      const chart = window.profiler.charts.get('gpu_util');
      return chart.element.dataset.state === 'ready' &&
        Math.min(...chart.plot.data[3 + 6].filter((v) => v !== null)) > 0;
    }, null, { timeout: 15000 });
    await page.locator('section[data-family="gpu_util"] .u-legend .u-series[data-series="node-1"]').click();
    await page.waitForFunction((id) => location.hash === `#/trials/${id}?agent=node-1`, NODES_TRIAL);
    await page.waitForFunction(() => window.profiler.agent === 'node-1' &&
      document.querySelector('#agent').value === 'node-1');
    // An agent that is not percent-encoding, or not of the trial: the first.
    for (const agent of ['%E0%A4', 'node-9']) {
      await page.evaluate(([id, a]) => { location.hash = `#/trials/${id}?agent=${a}`; },
        [NODES_TRIAL, agent]);
      await page.waitForFunction(() => window.profiler.agent === 'node-0' &&
        document.querySelector('#agent').value === 'node-0');
    }
  });

  it('compares runs chosen in the trial list, relative to their starts or on wall-clock time', async () => {
    await page.evaluate(() => { location.hash = '#/'; });
    await page.locator(`tr[data-trial-id="${EXTREMES_TRIAL}"] input.compare`).check();
    await page.locator(`tr[data-trial-id="${RUN_TRIAL}"] input.compare`).check();
    assert.equal(await page.locator('#compare').innerText(), 'Compare 2 trials');
    await page.locator('#compare').click();
    await page.waitForFunction((ids) => location.hash === `#/compare?trials=${ids}`,
      `${EXTREMES_TRIAL},${RUN_TRIAL}`);
    const ready = () => page.locator('section[data-family="gpu_util"][data-state="ready"]')
      .waitFor({ timeout: 15000 });
    await ready();
    const facts = () => page.evaluate(() => {
      const chart = window.profiler.charts.get('gpu_util');
      return { labels: chart.shown.map((l) => l.label.text), xs: chart.plot.data[0],
        resolutionMs: chart.resolutionMs,
        lowest: chart.shown.map((_, i) => Math.min(...chart.plot.data[3 + 3 * i].filter((v) => v !== null))),
        highest: chart.shown.map((_, i) => Math.max(...chart.plot.data[2 + 3 * i].filter((v) => v !== null))) };
    });
    let f = await facts();
    assert.deepEqual(f.labels, [`Trial ${RUN_TRIAL}`, `Trial ${EXTREMES_TRIAL}`]);
    assert.equal(f.xs[0], 0);  // both from their starts
    assert.ok(f.xs[f.xs.length - 1] < 8 * 86400, f.xs[f.xs.length - 1]);
    // Planted in trial 45 on single GPUs of eight: they stay in the band.
    assert.equal(f.lowest[1], 0);
    assert.equal(f.highest[1], 100);
    assert.equal(f.highest[0], 100);  // trial 42's one-sample spike
    await page.screenshot({ path: path.join(artifactDir, 'compare_runs.png') });

    const week = f.resolutionMs;
    await dragAcross(page, 'gpu_util', 0.2, 0.3);
    await page.waitForFunction((r) => window.profiler.charts.get('gpu_util').resolutionMs < r
      && window.profiler.charts.get('gpu_util').element.dataset.state === 'ready', week);
    f = await facts();
    assert.equal(f.labels.length, 2);  // every trial refetched
    await page.locator('#reset-zoom').click();
    await page.selectOption('#time-axis', 'wall');
    await page.waitForFunction(() => window.profiler.charts.get('gpu_util').plot &&
      window.profiler.charts.get('gpu_util').plot.data[0][0] > 1.7e9);
    await ready();
  });

  it('charts a window whose raw rows retention removed from buckets, and says so', async () => {
    // Retention back to a day after the run's start: its first day's raw rows
    // go (the other trials are all newer).
    const hours = Math.floor((Date.now() - (runStartMs + DAY_MS)) / 3600000);
    execFileSync(metricsctlPath, ['retention', 'apply', `--raw-retention=${hours}h`,
      '--database-url', `dbname=${server.db}`], { encoding: 'utf8' });
    await page.evaluate((id) => { location.hash = `#/trials/${id}`; }, RUN_TRIAL);
    await page.waitForFunction((n) => window.profiler && window.profiler.trialId === n &&
      window.profiler.charts.size === 7, RUN_TRIAL);
    await allChartsReady(page);
    const detail = page.locator('section[data-family="cpu"] .chart-detail');
    assert.doesNotMatch(await detail.innerText(), /expired/);  // the week: rollups anyway
    // The first 17 hours, then 50 minutes of them: raw points before
    // retention.
    await dragAcross(page, 'cpu', 0, 0.1);
    await page.waitForFunction(() => window.profiler.charts.get('cpu').resolutionMs < 600000);
    await allChartsReady(page);
    await dragAcross(page, 'cpu', 0.2, 0.25);
    await page.waitForFunction(() => window.profiler.charts.get('cpu').rawExpired === true,
      null, { timeout: 15000 });
    await allChartsReady(page);
    assert.equal(await detail.innerText(), '1 min buckets (raw data expired)');
    assert.ok((await chartFacts(page, 'cpu')).xs.length > 10);
  });

  it('says so when a trial is missing, a token revoked, or the service down', async () => {
    await page.evaluate(() => { location.hash = '#/trials/999999'; });
    await page.locator('.error-box h1').waitFor();
    assert.equal(await page.locator('.error-box h1').innerText(), 'Trial 999999 does not exist.');
    // Said once, in a whole sentence.
    const said = await page.locator('.error-box').innerText();
    assert.equal(said.match(/does not exist/gi).length, 1, said);

    // Revoked: the next call (within metricsd's 5 s) returns to sign-in.
    server.revokeToken(viewerToken);
    const revoked = Date.now();
    for (let i = 0; ; i++) {
      await page.evaluate((n) => { location.hash = n % 2 ? '#/' : '#/trials/41'; }, i);
      const form = page.locator('form.sign-in');
      try {
        await form.waitFor({ timeout: 500 });
        break;
      } catch (e) {
        assert.ok(Date.now() - revoked < 6000, 'still signed in 6 s after the revocation');
      }
    }
    console.log(`revoked: back to sign-in after ${Date.now() - revoked} ms`);
    assert.match(await page.locator('#sign-in-error').innerText(), /did not accept/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('metricsd.token')), null);

    await server.stop();
    await page.evaluate(() => { location.hash = '#/elsewhere'; });
    await page.evaluate(() => { location.hash = '#/'; });
    const box = page.locator('.error-box[data-kind="unreachable"]');
    await box.waitFor({ timeout: 10000 });
    assert.match(await box.innerText(), /Cannot reach the metrics service/);
  });

  it('loaded nothing but metricsd\'s own files and API, without script errors', () => {
    const foreign = requests.filter((u) => !u.startsWith(server.base));
    assert.deepEqual(foreign, []);
    assert.deepEqual(pageErrors, []);
  });
});
