// Which bucket extremes a chart draws as leaving their line (node --test).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { departures, typicalSpreads } from '../src/extremes.js';

// A line of `n` buckets around `level`, each spreading `noise` either side,
// with the changes of `planted` ({j: [min, max]}) applied.
function line(n, level, noise, planted = {}) {
  const mean = [];
  const min = [];
  const max = [];
  for (let j = 0; j < n; j++) {
    const wobble = noise * (((j * 7919) % 13) / 13);  // spreads differ a little
    mean.push(level);
    min.push(level - noise + wobble / 4);
    max.push(level + noise - wobble / 4);
    if (planted[j]) [min[j], max[j]] = planted[j];
  }
  return { mean, min, max };
}

function leaving({ mean, min, max }, pxPerUnit) {
  const typical = typicalSpreads(mean, min, max);
  const out = [];
  for (let j = 0; j < mean.length; j++) {
    const d = departures(j, mean, min, max, typical, pxPerUnit);
    if (d.low) out.push(`${j} low`);
    if (d.high) out.push(`${j} high`);
  }
  return out;
}

test('a one-bucket dip and spike in a steady line leave it; its noise does not', () => {
  // Free memory around 12 GiB, a bucket dipping to 0.2 GiB; 10 px a GiB.
  const memory = line(600, 12, 0.1, { 300: [0.2, 12.1] });
  assert.deepEqual(leaving(memory, 10), ['300 low']);
  // Utilization at 30 %, a stall to 0 and a spike to 100; 1.5 px a percent.
  const util = line(600, 30, 2, { 100: [0, 32], 450: [28, 100] });
  assert.deepEqual(leaving(util, 1.5), ['100 low', '450 high']);
});

test('eight GPUs of steady noise leave no whiskers, but their stalls do', () => {
  for (let g = 0; g < 8; g++) {
    const planted = g === 5 ? { 200: [0, 95] } : {};
    const util = line(600, 86.5 + g, 1.5 + g / 8, planted);
    assert.deepEqual(leaving(util, 1.5), g === 5 ? ['200 low'] : [], `GPU ${g}`);
  }
});

test('the typical spread is local: a calm day beside a noisy one', () => {
  // 300 calm buckets (±0.5), then 300 noisy ones (±5), a dip in each half.
  const calm = line(300, 50, 0.5, { 150: [40, 50.5] });
  const noisy = line(300, 50, 5, { 150: [10, 55] });
  const both = { mean: [...calm.mean, ...noisy.mean], min: [...calm.min, ...noisy.min],
    max: [...calm.max, ...noisy.max] };
  // 10 below a calm line leaves it; the noisy half's ±5 does not, nor do the
  // buckets at the change; 40 below the noisy line does.
  assert.deepEqual(leaving(both, 1.5), ['150 low', '450 low']);
});

test('a step is the line\'s own path, not an extreme', () => {
  // 90 % for 100 buckets, then 30 %; the bucket of the step holds both.
  const busy = line(100, 90, 2);
  const idle = line(100, 30, 2);
  const step = { mean: [...busy.mean, ...idle.mean], min: [...busy.min, ...idle.min],
    max: [...busy.max, ...idle.max] };
  [step.mean[100], step.min[100], step.max[100]] = [60, 28, 92];
  assert.deepEqual(leaving(step, 1.5), []);
  // A stall to 0 in that bucket still leaves it.
  step.min[100] = 0;
  assert.deepEqual(leaving(step, 1.5), ['100 low']);
});

test('closer than a few pixels to its line, an extreme is the line', () => {
  // A flat line (no spread at all) whose one bucket reaches 1 unit higher:
  // drawn at 4 px a unit, not at 2 px a unit.
  const flat = line(100, 5, 0, { 50: [5, 6] });
  assert.deepEqual(leaving(flat, 4), ['50 high']);
  assert.deepEqual(leaving(flat, 2), []);
});

test('gaps and raw points leave nothing', () => {
  const raw = { mean: [1, 7, null, 3], min: [1, 7, null, 3], max: [1, 7, null, 3] };
  assert.deepEqual(leaving(raw, 10), []);
  assert.deepEqual(typicalSpreads([null, null], [null, null], [null, null]), [null, null]);
});
