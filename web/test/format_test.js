// Unit formatting as the charts show it (node --test).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  byteTickSteps, formatDuration, formatResolution, formatTick, formatValue,
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

test('bucket widths and durations', () => {
  assert.equal(formatResolution(0), 'raw points');
  assert.equal(formatResolution(10000), '10 s buckets');
  assert.equal(formatResolution(600000), '10 min buckets');
  assert.equal(formatResolution(7200000), '2 h buckets');
  assert.equal(formatResolution(1500), '1500 ms buckets');
  assert.equal(formatDuration(45000), '45 s');
  assert.equal(formatDuration(7 * 86400000), '7 d');
});

test('axis ticks leave long units to the heading and step bytes by powers of two', () => {
  assert.equal(formatTick(150, 'operations/s'), '150');
  assert.equal(formatTick(2 ** 33, 'bytes'), '8 GiB');
  assert.ok(byteTickSteps().includes(4 * 2 ** 30));
  assert.ok(!byteTickSteps().includes(5 * 2 ** 30));
});
