// OpenTelemetry's own JavaScript SDK and exporters (from npm, the versions
// package-lock.json pins) against a real metricsd: the gRPC, HTTP/protobuf
// and HTTP/JSON exporters each send gauges and sums to one trial, and
// @opentelemetry/host-metrics sends this machine's real system.* metrics,
// whose CPU share and network rates must come out as the service's series,
// computed from the very points the exporter sent. Also a partial success (a
// histogram among gauges), a wrong token and a reporter token of another
// trial, as an exporter sees them.
//
// Usage: node otel_clients_test.js PATH/TO/metricsd PATH/TO/metricsctl

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Metadata } from '@grpc/grpc-js';
import { diag, DiagLogLevel, ValueType } from '@opentelemetry/api';
import { OTLPMetricExporter as GrpcExporter } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPMetricExporter as JsonExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { HostMetrics } from '@opentelemetry/host-metrics';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';

import { Metricsd } from '../testing/metricsd_process.mjs';

const [metricsdPath, metricsctlPath] = process.argv.slice(2);
if (!metricsdPath || !metricsctlPath) {
  console.error('usage: node otel_clients_test.js PATH/TO/metricsd PATH/TO/metricsctl');
  process.exit(2);
}

const TRIAL = 7;
const OTHER_TRIAL = 8;
const GPU = 'GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9b';
const GIB = 2 ** 30;

// The exporters' warnings (a partial success is one), kept to assert on.
const warnings = [];
diag.setLogger({
  error: (...a) => warnings.push(a.join(' ')), warn: (...a) => warnings.push(a.join(' ')),
  info() {}, debug() {}, verbose() {},
}, DiagLogLevel.WARN);

// A reader whose collections the test triggers and exports itself, so it
// sees each export's result and keeps what was sent.
class ManualReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

// A meter provider for one resource with the given exporter. send()
// collects and exports once; it resolves to the export's result. Sums are
// cumulative unless `temporality` says otherwise.
function pipeline(exporter, attributes, temporality = AggregationTemporality.CUMULATIVE) {
  const reader = new ManualReader({ aggregationTemporalitySelector: () => temporality });
  const provider = new MeterProvider({ resource: resourceFromAttributes(attributes),
    readers: [reader] });
  const sent = [];
  return {
    meterProvider: provider,
    meter: provider.getMeter('otel-clients-test'),
    sent,
    async send() {
      const { resourceMetrics, errors } = await reader.collect();
      assert.deepEqual(errors, []);
      sent.push(resourceMetrics);
      return new Promise((resolve) => exporter.export(resourceMetrics, resolve));
    },
    async close() {
      await provider.shutdown();
      await exporter.shutdown();
    },
  };
}

function grpcExporter(server, token) {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new GrpcExporter({ url: `http://127.0.0.1:${server.grpcPort}`, metadata });
}

function httpExporter(Exporter, server, token, compression) {
  return new Exporter({ url: `${server.base}/v1/metrics`, compression,
    headers: { Authorization: `Bearer ${token}` } });
}

// Microseconds of an SDK time ([seconds, nanoseconds]), as metricsd stores
// a point's time_unix_nano.
function micros([s, ns]) {
  return s * 1e6 + Math.floor(ns / 1000);
}

// Every metric named `name` in what a pipeline sent.
function metricsOf(sent, name) {
  return sent.flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics))
    .filter((m) => m.descriptor.name === name);
}

// Every point of metric `name` in what a pipeline sent, with its time.
function pointsOf(sent, name) {
  return metricsOf(sent, name).flatMap((m) => m.dataPoints.map((p) => ({ ...p, us: micros(p.endTime),
      startUs: micros(p.startTime) })));
}

// A series' stored points, raw, in time order: [{us, value}].
async function stored(server, { agent, name, gpu = '' }) {
  // Ten minutes around now in 10 000 points: raw points.
  const q = new URLSearchParams({ start: new Date(Date.now() - 300000).toISOString(),
    end: new Date(Date.now() + 300000).toISOString(), maxPoints: '10000', name,
    agentId: agent, gpuUuid: gpu });
  const answer = await server.call('GET', `/api/v1/trials/${TRIAL}/metrics/system?${q}`);
  assert.equal(answer.series.length, 1, `${agent} ${name} ${gpu}: ${JSON.stringify(answer)}`);
  const s = answer.series[0];
  assert.equal(s.resolutionMs, 0, 'raw points');
  return s.firstTimeMs.map((ms, i) => ({ ms, value: s.firstValue[i] }));
}

// The agent's series as {name/gpu: unit}.
async function seriesUnits(server, agent) {
  const { series } = await server.call('GET', `/api/v1/trials/${TRIAL}/metrics/system/series`);
  return Object.fromEntries(series.filter((s) => s.agentId === agent)
    .map((s) => [s.gpuUuid ? `${s.name}/${s.gpuUuid}` : s.name, s.unit]));
}

function near(actual, expected, what) {
  assert.ok(Math.abs(actual - expected) <= 1e-9 * Math.max(1, Math.abs(expected)),
    `${what}: ${actual}, expected ${expected}`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('OpenTelemetry exporters', { timeout: 120000 }, () => {
  const server = new Metricsd({ metricsd: metricsdPath, metricsctl: metricsctlPath,
    name: 'otel_clients_test' });

  before(async () => {
    await server.start();
    await server.call('POST', '/api/v1/trials', { id: TRIAL });
    await server.call('POST', '/api/v1/trials', { id: OTHER_TRIAL });
  });

  after(async () => {
    await server.stop();
    server.dropDatabase();
  });

  const exporters = [
    ['gRPC', (token) => grpcExporter(server, token)],
    ['HTTP/protobuf', (token) => httpExporter(ProtoExporter, server, token)],
    ['HTTP/JSON', (token) => httpExporter(JsonExporter, server, token)],
    ['HTTP/protobuf gzip', (token) => httpExporter(ProtoExporter, server, token, 'gzip')],
    ['HTTP/JSON gzip', (token) => httpExporter(JsonExporter, server, token, 'gzip')],
  ];
  for (const [kind, make] of exporters) {
    it(`stores gauges and sums sent by the ${kind} exporter`, async () => {
      const agent = `node-${kind.replace(/\W+/g, '-').toLowerCase()}`;
      const p = pipeline(make(server.adminToken), { 'trial.id': String(TRIAL),
        'host.name': agent, 'service.name': 'otel-clients-test' });
      const util = p.meter.createGauge('hw.gpu.utilization', { unit: '1' });
      const limit = p.meter.createGauge('hw.gpu.memory.limit', { unit: 'By',
        valueType: ValueType.INT });
      const usage = p.meter.createGauge('hw.gpu.memory.usage', { unit: 'By',
        valueType: ValueType.INT });
      const loss = p.meter.createGauge('train.loss', { unit: '1' });
      const samples = p.meter.createCounter('train.samples', { unit: '{sample}',
        valueType: ValueType.INT });
      const rounds = [[0.42, 31 * GIB, 2.5, 640], [0.97, 77 * GIB, 2.25, 1280]];
      for (const [u, used, l, n] of rounds) {
        util.record(u, { 'hw.id': GPU });
        limit.record(80 * GIB, { 'hw.id': GPU });
        usage.record(used, { 'hw.id': GPU });
        loss.record(l);
        samples.add(n, { stage: 'train' });
        const result = await p.send();
        assert.equal(result.code, 0, `${kind}: ${result.error}`);
        await sleep(5);  // the next collection at a later microsecond
      }
      await p.close();

      assert.deepEqual(await seriesUnits(server, agent), {
        [`gpu_util/${GPU}`]: 'percent', [`gpu_free_memory/${GPU}`]: 'bytes',
        'train.loss': '1', 'train.samples{stage=train}': '{sample}',
      });
      const times = pointsOf(p.sent, 'train.loss').map((pt) => Math.floor(pt.us / 1000));
      const expect = async (name, gpu, values) => assert.deepEqual(
        await stored(server, { agent, name, gpu }),
        values.map((value, i) => ({ ms: times[i], value })), `${kind} ${name}`);
      await expect('gpu_util', GPU, [42, 97]);
      await expect('gpu_free_memory', GPU, [49 * GIB, 3 * GIB]);
      await expect('train.loss', '', [2.5, 2.25]);
      await expect('train.samples{stage=train}', '', [640, 1920]);  // cumulative
    });
  }

  it("turns @opentelemetry/host-metrics' system metrics into the service's series", async () => {
    const agent = 'node-host-metrics';
    const p = pipeline(httpExporter(ProtoExporter, server, server.adminToken),
      { 'trial.id': String(TRIAL), 'host.name': agent });
    const host = new HostMetrics({ meterProvider: p.meterProvider, name: 'host',
      metricGroups: ['system.cpu', 'system.memory', 'system.network'] });
    host.start();
    for (let i = 0; i < 4; i++) {
      const result = await p.send();
      assert.equal(result.code, 0, String(result.error));
      await sleep(300);
    }
    await p.close();

    const units = await seriesUnits(server, agent);
    assert.equal(units.cpu_util_simple, 'percent');
    assert.equal(units.net_throughput_sent, 'bytes/s');
    assert.equal(units.net_throughput_recv, 'bytes/s');
    // Stored under its own name, with the unit it was sent with (host-metrics
  // gives this one none).
  assert.equal(units['system.memory.usage{system.memory.state=free}'],
    metricsOf(p.sent, 'system.memory.usage')[0].descriptor.unit);

    // CPU: 100 × (1 − the mean over CPUs of the idle share), at each time.
    const idle = pointsOf(p.sent, 'system.cpu.utilization')
      .filter((pt) => pt.attributes['system.cpu.state'] === 'idle');
    const cpuTimes = [...new Set(idle.map((pt) => pt.us))];
    const cpu = await stored(server, { agent, name: 'cpu_util_simple' });
    console.log(`cpu_util_simple: ${JSON.stringify(cpu.map((c) => c.value))} from ` +
      `${idle.length / cpuTimes.length} CPUs`);
    assert.equal(cpu.length, cpuTimes.length);
    cpuTimes.forEach((us, i) => {
      const shares = idle.filter((pt) => pt.us === us).map((pt) => pt.value);
      assert.equal(cpu[i].ms, Math.floor(us / 1000));
      near(cpu[i].value, 100 * (1 - shares.reduce((a, b) => a + b) / shares.length),
        `cpu_util_simple at ${us}`);
    });

    // Network: the rate of each device's cumulative bytes between sends,
    // summed over devices but lo; the first send is a base, not a rate.
    const io = pointsOf(p.sent, 'system.network.io')
      .filter((pt) => pt.attributes['system.device'] !== 'lo');
    assert.ok(io.length > 0, 'host-metrics sent no network device but lo');
    for (const [direction, name] of [['transmit', 'net_throughput_sent'],
      ['receive', 'net_throughput_recv']]) {
      const points = io.filter((pt) => pt.attributes['network.io.direction'] === direction);
      const times = [...new Set(points.map((pt) => pt.us))];
      const expected = times.slice(1).map((us, i) => {
        const rate = points.filter((pt) => pt.us === us).reduce((total, pt) => {
          const previous = points.find((q) => q.us === times[i] &&
            q.attributes['system.device'] === pt.attributes['system.device']);
          return total + (pt.value - previous.value) / ((us - previous.us) / 1e6);
        }, 0);
        return { ms: Math.floor(us / 1000), value: rate };
      });
      const got = await stored(server, { agent, name });
      console.log(`${name}: ${JSON.stringify(got.map((g) => g.value))} from devices ` +
        `${[...new Set(points.map((pt) => pt.attributes['system.device']))]}`);
      assert.deepEqual(got.map((g) => g.ms), expected.map((e) => e.ms), name);
      got.forEach((g, i) => near(g.value, expected[i].value, `${name} at ${g.ms}`));
    }

    const free = pointsOf(p.sent, 'system.memory.usage')
      .filter((pt) => pt.attributes['system.memory.state'] === 'free');
    assert.deepEqual(await stored(server, { agent,
      name: 'system.memory.usage{system.memory.state=free}' }),
    free.map((pt) => ({ ms: Math.floor(pt.us / 1000), value: pt.value })));
  });

  // Rates of a device's bytes: the difference of its cumulative points over
  // their time apart, or a delta point over its own interval; summed over
  // devices but lo at each time, where every device has a rate.
  function expectedRates(sent, metric, directionKey, direction, temporality) {
    const points = pointsOf(sent, metric).filter((pt) =>
      pt.attributes['system.device'] !== 'lo' && pt.attributes[directionKey] === direction);
    const times = [...new Set(points.map((pt) => pt.us))];
    const rates = times.map((us, i) => {
      const now = points.filter((pt) => pt.us === us);
      if (temporality === AggregationTemporality.DELTA) {
        // The SDK's first delta may start and end in one millisecond: no rate.
        if (now.some((pt) => pt.us <= pt.startUs)) return null;
        return now.reduce((total, pt) => total + pt.value / ((us - pt.startUs) / 1e6), 0);
      }
      if (i === 0) return null;  // a base, not a rate
      return now.reduce((total, pt) => {
        const previous = points.find((q) => q.us === times[i - 1] &&
          q.attributes['system.device'] === pt.attributes['system.device']);
        return total + (pt.value - previous.value) / ((us - previous.us) / 1e6);
      }, 0);
    });
    return times.map((us, i) => ({ ms: Math.floor(us / 1000), value: rates[i] }))
      .filter((r) => r.value !== null);
  }

  for (const [temporalityName, temporality] of [['cumulative', AggregationTemporality.CUMULATIVE],
    ['delta', AggregationTemporality.DELTA]]) {
    it(`stores rates of ${temporalityName} network and disk counters`, async () => {
      const agent = `node-rates-${temporalityName}`;
      const p = pipeline(grpcExporter(server, server.adminToken),
        { 'trial.id': String(TRIAL), 'host.name': agent }, temporality);
      const net = p.meter.createCounter('system.network.io', { unit: 'By',
        valueType: ValueType.INT });
      const disk = p.meter.createCounter('system.disk.io', { unit: 'By',
        valueType: ValueType.INT });
      const ops = p.meter.createCounter('system.disk.operations', { unit: '{operation}',
        valueType: ValueType.INT });
      for (let round = 1; round <= 4; round++) {
        for (const [device, scale] of [['eth0', 1], ['eth1', 3], ['lo', 1000]]) {
          net.add(round * 1000 * scale, { 'system.device': device,
            'network.io.direction': 'transmit' });
          net.add(round * 2500 * scale, { 'system.device': device,
            'network.io.direction': 'receive' });
        }
        disk.add(round * 4096, { 'system.device': 'sda', 'disk.io.direction': 'read' });
        disk.add(round * 8192, { 'system.device': 'sda', 'disk.io.direction': 'write' });
        ops.add(round, { 'system.device': 'sda', 'disk.io.direction': 'read' });
        ops.add(2 * round, { 'system.device': 'sda', 'disk.io.direction': 'write' });
        const result = await p.send();
        assert.equal(result.code, 0, String(result.error));
        await sleep(20);
      }
      await p.close();

      assert.deepEqual(await seriesUnits(server, agent), {
        net_throughput_sent: 'bytes/s', net_throughput_recv: 'bytes/s',
        disk_throughput_read: 'bytes/s', disk_throughput_write: 'bytes/s',
        disk_iops: 'operations/s',
      });
      for (const [metric, key, direction, name] of [
        ['system.network.io', 'network.io.direction', 'transmit', 'net_throughput_sent'],
        ['system.network.io', 'network.io.direction', 'receive', 'net_throughput_recv'],
        ['system.disk.io', 'disk.io.direction', 'read', 'disk_throughput_read'],
        ['system.disk.io', 'disk.io.direction', 'write', 'disk_throughput_write']]) {
        const expected = expectedRates(p.sent, metric, key, direction, temporality);
        assert.ok(expected.length >= 3, `${name}: ${expected.length} rates`);
        const got = await stored(server, { agent, name });
        assert.deepEqual(got.map((g) => g.ms), expected.map((e) => e.ms), name);
        got.forEach((g, i) => near(g.value, expected[i].value, `${name} at ${g.ms}`));
        assert.ok(got.every((g) => g.value > 0), `${name}: ${JSON.stringify(got)}`);
      }
      // Operations: reads and writes together.
      const read = expectedRates(p.sent, 'system.disk.operations', 'disk.io.direction', 'read',
        temporality);
      const write = expectedRates(p.sent, 'system.disk.operations', 'disk.io.direction',
        'write', temporality);
      // A time has a sum only where both have a rate: the SDK may start one
      // direction's first delta in the millisecond it ends, not the other's.
      const both = read.filter((r) => write.some((w) => w.ms === r.ms)).map((r) =>
        ({ ms: r.ms, value: r.value + write.find((w) => w.ms === r.ms).value }));
      assert.ok(both.length >= 3, `disk_iops: ${both.length} sums`);
      const iops = await stored(server, { agent, name: 'disk_iops' });
      assert.deepEqual(iops.map((g) => g.ms), both.map((e) => e.ms), 'disk_iops');
      iops.forEach((g, i) => near(g.value, both[i].value, `disk_iops at ${g.ms}`));
    });
  }

  it('answers a histogram among gauges with a partial success, storing the gauges', async () => {
    const agent = 'node-partial';
    const p = pipeline(httpExporter(ProtoExporter, server, server.adminToken),
      { 'trial.id': String(TRIAL), 'host.name': agent });
    p.meter.createGauge('train.loss', { unit: '1' }).record(1.5);
    p.meter.createHistogram('step.seconds', { unit: 's' }).record(0.25);
    warnings.length = 0;
    const result = await p.send();
    await p.close();
    assert.equal(result.code, 0, String(result.error));
    const partial = warnings.find((w) => w.includes('Partial Success'));
    assert.ok(partial, `no partial success in ${JSON.stringify(warnings)}`);
    assert.match(partial, /"rejectedDataPoints":"?1"?/);
    assert.match(partial, /step\.seconds: histograms and summaries are not supported/);
    assert.deepEqual((await stored(server, { agent, name: 'train.loss' })).map((s) => s.value),
      [1.5]);
  });

  for (const [kind, make] of exporters.slice(0, 3)) {
    it(`refuses a wrong token and another trial's reporter over ${kind}`, async () => {
      const agent = `node-refused-${kind.replace(/\W+/g, '-').toLowerCase()}`;
      const wrong = pipeline(make('not-a-token'), { 'trial.id': String(TRIAL),
        'host.name': agent });
      wrong.meter.createGauge('train.loss').record(3);
      const refused = await wrong.send();
      await wrong.close();
      assert.equal(refused.code, 1, 'a wrong token must fail the export');
      assert.match(String(refused.error), /401|UNAUTHENTICATED|Unauthorized|token/i);

      const reporter = server.createToken('reporter', OTHER_TRIAL);
      const other = pipeline(make(reporter), { 'trial.id': String(TRIAL),
        'host.name': agent });
      other.meter.createGauge('train.loss').record(4);
      warnings.length = 0;
      const result = await other.send();
      await other.close();
      assert.equal(result.code, 0, String(result.error));
      assert.ok(warnings.some((w) => w.includes(`the token is for trial ${OTHER_TRIAL} only`)),
        JSON.stringify(warnings));
      assert.equal((await seriesUnits(server, agent))['train.loss'], undefined,
        'nothing stored for a refused trial');
    });
  }
});
