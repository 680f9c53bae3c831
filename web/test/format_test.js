// Unit formatting as the charts show it (node --test).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  byteTickSteps, formatDuration, formatRange, formatResolution, formatTicks, formatTime, formatTimeTicks,
  formatHardware, formatValue, widenedWindow,
} from '../src/format.js';

test('percent, bytes and bytes/s', () => {
  assert.equal(formatValue(42.25, 'percent'), '42.3%');
  assert.equal(formatValue(100, 'percent'), '100%');
  assert.equal(formatValue(0, 'percent'), '0%');
  assert.equal(formatValue(512, 'bytes'), '512 B');
  assert.equal(formatValue(1536, 'bytes'), '1.5 KiB');
  assert.equal(formatValue(3 * 1024 ** 3, 'bytes'), '3 GiB');
  assert.equal(formatValue(250 * 1024 ** 2, 'bytes/s'), '250 MiB/s');
  assert.equal(formatValue(1234.5, 'operations/s'), '1235 operations/s');
  assert.equal(formatValue(null, 'percent'), '–');
});

test('a bucket\'s range names a shared unit once', () => {
  assert.equal(formatRange(0, 100, 'percent'), '0 – 100%');
  assert.equal(formatRange(1.5 * 2 ** 30, 12.5 * 2 ** 30, 'bytes'), '1.5 – 12.5 GiB');
  assert.equal(formatRange(200 * 2 ** 20, 12.5 * 2 ** 30, 'bytes'), '200 MiB – 12.5 GiB');
  assert.equal(formatRange(3 * 2 ** 20, 9 * 2 ** 20, 'bytes/s'), '3 – 9 MiB/s');
  assert.equal(formatRange(-2.5, 40, ''), '-2.5 – 40');
  assert.equal(formatRange(12, 150, 'operations/s'), '12 – 150 operations/s');
});

test('bucket widths and durations', () => {
  assert.equal(formatResolution(0), 'raw points');
  assert.equal(formatResolution(10000), '10 s buckets');
  assert.equal(formatResolution(600000), '10 min buckets');
  assert.equal(formatResolution(7200000), '2 h buckets');
  assert.equal(formatResolution(1500), '1500 ms buckets');
  assert.equal(formatResolution(10000, true), '10 s buckets (raw data expired)');
  assert.equal(formatDuration(45000), '45 s');
  assert.equal(formatDuration(7 * 86400000), '7 d');
});

test('axis ticks tell their steps apart, leave long units to the axis label, step bytes by powers of two', () => {
  assert.deepEqual(formatTicks([150, 200], 'operations/s', 50), ['150', '200']);
  assert.deepEqual(formatTicks([2 ** 33, 2 ** 34], 'bytes', 2 ** 33), ['8 GiB', '16 GiB']);
  const tib = 1.35 * 2 ** 40;
  const base = Math.floor(tib / 2 ** 32) * 2 ** 32;
  assert.deepEqual(formatTicks([base, base + 2 ** 32], 'bytes', 2 ** 32), ['1380 GiB', '1384 GiB']);
  assert.deepEqual(formatTicks([40, 42.5, 45], 'percent', 2.5), ['40.0%', '42.5%', '45.0%']);
  assert.deepEqual(formatTicks([0, 0.25], '', 0.25), ['0', '0.25']);
  assert.deepEqual(formatTicks([0, 12000, 14000], 'operations/s', 2000), ['0', '12k', '14k']);
  assert.deepEqual(formatTicks([-0.0001, 1], 'tokens/s', 1), ['0', '1']);
  assert.ok(byteTickSteps().includes(4 * 2 ** 30));
  assert.ok(!byteTickSteps().includes(5 * 2 ** 30));
});

test('one time format: a 24-hour clock, seconds when ticks are seconds apart, the date on a new day', () => {
  process.env.TZ = 'UTC';
  const year = new Date().getFullYear();
  const t = Date.UTC(year, 10, 24, 21, 57, 40);
  assert.equal(formatTime(t), 'Nov 24, 21:57:40');
  assert.equal(formatTime(Date.UTC(2001, 0, 2, 3, 4, 5)), 'Jan 2, 2001, 03:04:05');
  assert.deepEqual(formatTimeTicks([t, t + 10000, t + 20000], 10000),
    ['21:57:40\nNov 24', '21:57:50', '21:58:00']);
  const m = Date.UTC(year, 10, 24, 23, 0, 0);
  assert.deepEqual(formatTimeTicks([m, m + 3600000, m + 7200000], 3600000),
    ['23:00\nNov 24', '00:00\nNov 25', '01:00']);
  assert.deepEqual(formatTimeTicks([m, m + 86400000], 86400000), ['Nov 24', 'Nov 25']);
});

test('watts, hertz, celsius and bit sets', () => {
  assert.equal(formatValue(110, 'watts'), '110 W');
  assert.equal(formatValue(1400e6, 'hertz'), '1.4 GHz');
  assert.equal(formatValue(41, 'celsius'), '41 °C');
  assert.equal(formatValue(4, 'bitset'), '0x4');
  assert.equal(formatValue(2.5, 'bitset'), '2.5');
  assert.deepEqual(formatTicks([100, 200], 'watts', 100), ['100 W', '200 W']);
  assert.deepEqual(formatTicks([1.2e9, 1.4e9], 'hertz', 2e8), ['1200 MHz', '1400 MHz']);
  assert.deepEqual(formatTicks([0, 50], 'celsius', 50), ['0 °C', '50 °C']);
});

test('hardware in one line', () => {
  const gpu = (index, migMode = 'disabled') => ({ index, uuid: `GPU-${index}`,
    name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: '85520809984', migMode });
  assert.equal(formatHardware({
    gpus: [...Array(8).keys()].map((i) => gpu(i)), driverVersion: '550.54.15', cudaVersion: '12.4',
    cpuModel: 'Intel(R) Xeon(R) Platinum 8480+', cpuSockets: 2, cpuCount: 224,
    memoryTotalBytes: String(2 * 1024 ** 4),
  }), '8 × NVIDIA H100 80GB HBM3 (driver 550.54.15, CUDA 12.4); ' +
    '2 × Intel(R) Xeon(R) Platinum 8480+, 224 threads; 2 TiB');
  assert.equal(formatHardware({ gpus: [gpu(0, 'enabled')], cpuCount: 4 }),
    '1 × NVIDIA H100 80GB HBM3 (MIG on 1); 1 × CPU, 4 threads');
  assert.equal(formatHardware({ gpuStatus: 'NVML not available: x' }), '');
  assert.equal(formatHardware(undefined), '');
});

test('a zoom narrower than the least window widens around its middle', () => {
  assert.deepEqual(widenedWindow(5000, 9000, 1000), { startMs: 5000, endMs: 9000 });
  assert.deepEqual(widenedWindow(5000, 5200, 1000), { startMs: 4600, endMs: 5600 });
});
