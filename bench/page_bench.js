// The page benchmark (bench/page.sh; docs/benchmarks.md): a real metricsd on its own
// database (of the PostgreSQL pg_virtualenv started), seeded through gRPC
// ingest with a 7-day trial at 1 s of one agent with 8 GPUs (25 series,
// about 15 million values) and a 5-minute trial of the same shape. Headless
// Chromium (Debian's, through playwright-core, as the browser test) loads
// each trial's profiler view once to warm up, then `--loads` times, each
// view's loads alternated with its baseline's, timing navigation to every
// chart drawn (and to the last API answer's arrival, the rest being the
// page's own work). Then the summary views against their
// baselines, in the same run: a trial of `--nodes` agents (16) of the same
// shape, its all-agents view against one agent's view of it; and `--compare`
// (8) week-long trials compared against one of them alone. Prints a table,
// then one JSON object as the last line: {"week_load_p50_ms",
// "five_min_load_p50_ms", "ratio", "week_bytes", "nodes_ratio",
// "compare_ratio", and each view's p50} (week_bytes: the API answers one
// week load moved, follow stream excluded).
//
// Usage: node page_bench.js METRICSD PAGE_SEED [--loads=N] [--days=D]
//   [--nodes=N] [--compare=N] (0 leaves that part out)

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from '../web/node_modules/playwright-core/index.mjs';

const args = process.argv.slice(2);
const [metricsdPath, seedPath] = args.filter((a) => !a.startsWith('--'));
const flag = (name, fallback) => {
  const found = args.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.split('=')[1]) : fallback;
};
if (!metricsdPath || !seedPath) {
  console.error('usage: node page_bench.js METRICSD PAGE_SEED [--loads=N] [--days=D]');
  process.exit(2);
}
const LOADS = flag('loads', 10);
const DAYS = flag('days', 7);
const NODES = flag('nodes', 16);
const COMPARED = flag('compare', 8);
const WEEK_TRIAL = 1;
const FIVE_MIN_TRIAL = 2;
const NODES_TRIAL = 3;
const OTHER_WEEKS = 10;  // trials 10, 11, ...: compared with the week trial
const webRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
// metricsctl, built beside metricsd (build/server/metricsd, build/ctl/metricsctl).
const metricsctlPath = path.join(path.dirname(metricsdPath), '..', 'ctl', 'metricsctl');

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function startMetricsd(db) {
  const proc = spawn(metricsdPath, [
    '--database-url', `dbname=${db}`, '--migrate', '--auth=off',
    '--http-address', '127.0.0.1:0', '--grpc-address', '127.0.0.1:0', '--web-root', webRoot,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const ports = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`metricsd did not start: ${log}`)), 30000);
    proc.stdout.on('data', (d) => {
      out += d;
      const grpc = out.match(/gRPC listening on [^\s:]+:(\d+)/);
      const http = out.match(/HTTP listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (grpc && http) {
        clearTimeout(timer);
        resolve({ grpc: Number(grpc[1]), http: Number(http[1]) });
      }
    });
    proc.on('exit', (code) => reject(new Error(`metricsd exited ${code}: ${log}`)));
  });
  return { proc, exited, ...ports };
}

function seed(grpcPort, trial, seconds, agents = 1) {
  const t0 = Date.now();
  execFileSync(seedPath, [`--target=127.0.0.1:${grpcPort}`, `--trial=${trial}`,
    `--seconds=${seconds}`, `--agents=${agents}`], { stdio: 'inherit' });
  const s = (Date.now() - t0) / 1000;
  console.log(`  trial ${trial}: ${agents} agent(s), ${seconds} s at 1 Hz, ` +
    `${agents * seconds * 25} values, loaded in ${s.toFixed(1)} s`);
}

// One load of a trial's view: from navigation to every chart drawn. Returns
// {ms, bytes, charts}.
async function loadOnce(page, base, view) {
  await page.goto('about:blank');
  let bytes = 0;
  const pending = [];
  const onFinished = (request) => {
    if (!request.url().includes('/api/') || request.url().includes('/follow')) return;
    pending.push(request.sizes().then((s) => { bytes += s.responseBodySize; }, () => {}));
  };
  page.on('requestfinished', onFinished);
  const t0 = performance.now();
  await page.goto(`${base}/${typeof view === 'number' ? `#/trials/${view}` : view}`);
  const charts = await page.waitForFunction(() => {
    const sections = [...document.querySelectorAll('section.chart')];
    return window.profiler && window.profiler.charts.size > 0 &&
      sections.length === window.profiler.charts.size &&
      sections.every((s) => s.dataset.state === 'ready') && sections.length;
  }, null, { polling: 'raf', timeout: 120000 });
  const ms = performance.now() - t0;
  // When the page's last API answer (follow excluded) had arrived, from the
  // start of its navigation: the rest of `ms` is the page's own work.
  const apiMs = await page.evaluate(() => Math.max(0, ...performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/') && !e.name.includes('/follow'))
    .map((e) => e.responseEnd)));
  await Promise.all(pending);
  page.off('requestfinished', onFinished);
  return { ms, apiMs, bytes, charts: await charts.jsonValue() };
}

async function main() {
  const db = `page_bench_${process.pid}`;
  execFileSync('dropdb', ['--if-exists', db]);
  execFileSync('createdb', [db]);
  const server = await startMetricsd(db);
  const base = `http://127.0.0.1:${server.http}`;
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'page-bench-chromium-'));
  let context;
  try {
    console.log('seeding through gRPC ingest ...');
    seed(server.grpc, WEEK_TRIAL, DAYS * 86400);
    seed(server.grpc, FIVE_MIN_TRIAL, 300);
    if (NODES > 0) seed(server.grpc, NODES_TRIAL, DAYS * 86400, NODES);
    const others = Array.from({ length: Math.max(0, COMPARED - 1) }, (_, i) => OTHER_WEEKS + i);
    for (const trial of others) seed(server.grpc, trial, DAYS * 86400);
    // A week's rows written in minutes leave autovacuum and the checkpointer
    // busy for a while; a week-old trial's rows have long been vacuumed.
    // Done here, so the loads are timed against the steady state, not
    // beside the seed's aftermath.
    // The seeded weeks are history: sealed (with their rollups) as metricsd's
    // sealer would have within minutes, so loads read what they read in
    // service, not rows waiting for a seal.
    const t0 = Date.now();
    execFileSync(metricsctlPath, ['seal', '--database-url', `dbname=${db}`], { encoding: 'utf8' });
    execFileSync('psql', ['-q', '-d', db, '-c', 'VACUUM ANALYZE', '-c', 'CHECKPOINT']);
    console.log(`  sealed, VACUUM ANALYZE and CHECKPOINT in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    const page = context.pages()[0] || await context.newPage();
    const results = {};
    // Each view beside its baseline, their loads alternated so that the
    // machine's slower and faster moments fall on both alike.
    const pairs = [[['week', WEEK_TRIAL], ['five_min', FIVE_MIN_TRIAL]]];
    if (NODES > 0) {
      pairs.push([['one_agent', NODES_TRIAL], ['all_agents', `#/trials/${NODES_TRIAL}/nodes`]]);
    }
    if (COMPARED > 1) {
      pairs.push([['week_alone', WEEK_TRIAL], ['compare', `#/compare?trials=${[WEEK_TRIAL, ...others].join(',')}`]]);
    }
    for (const pair of pairs) {
      for (const [name, trial] of pair) {
        await loadOnce(page, base, trial);  // warm-up
        results[name] = [];
      }
      for (let i = 0; i < LOADS; i++) {
        for (const [name, trial] of pair) results[name].push(await loadOnce(page, base, trial));
      }
    }
    console.log(`\nnavigation to all charts drawn, ${LOADS} loads each after a warm-up`);
    console.log('  trial        p50 ms   p95 ms   max ms   API p50 ms   charts   API bytes');
    for (const [name, runs] of Object.entries(results)) {
      const ms = runs.map((r) => r.ms);
      console.log(`  ${name.padEnd(10)} ${percentile(ms, 0.5).toFixed(0).padStart(8)} ` +
        `${percentile(ms, 0.95).toFixed(0).padStart(8)} ${Math.max(...ms).toFixed(0).padStart(8)} ` +
        `${percentile(runs.map((r) => r.apiMs), 0.5).toFixed(0).padStart(12)} ` +
        `${String(runs[0].charts).padStart(8)} ${String(runs[0].bytes).padStart(11)}`);
    }
    const p50 = (name) => percentile(results[name].map((r) => r.ms), 0.5);
    const week = p50('week');
    const fiveMin = p50('five_min');
    const summary = {
      week_load_p50_ms: Math.round(week),
      five_min_load_p50_ms: Math.round(fiveMin),
      ratio: Number((week / fiveMin).toFixed(2)),
      week_bytes: results.week[0].bytes,
    };
    if (results.all_agents) {
      summary.one_agent_p50_ms = Math.round(p50('one_agent'));
      summary.all_agents_p50_ms = Math.round(p50('all_agents'));
      summary.nodes_ratio = Number((p50('all_agents') / p50('one_agent')).toFixed(2));
    }
    if (results.compare) {
      summary.compare_p50_ms = Math.round(p50('compare'));
      summary.compare_ratio = Number((p50('compare') / p50('week_alone')).toFixed(2));
    }
    console.log(JSON.stringify(summary));
  } finally {
    if (context) await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
    server.proc.kill('SIGTERM');
    await server.exited;
    execFileSync('dropdb', ['--if-exists', db]);
  }
}

main().catch((e) => {
  console.error(`page_bench: ${e.stack || e}`);
  process.exit(1);
});
