// The page's families against the signal vocabulary (common/vocabulary/
// signals.json, which the agent and the Python client are made from): every
// signal an agent sends has a chart, no family names a signal the table
// lacks, and a family is per GPU exactly when its signals are (node --test).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { FAMILIES } from '../src/families.js';

const table = JSON.parse(readFileSync(
  new URL('../../common/vocabulary/signals.json', import.meta.url), 'utf8'));
const signals = new Map(table.signals.map((s) => [s.name, s]));
const perGpu = (s) => s.scope === 'gpu' || s.scope === 'job_gpu';

test('every family names vocabulary signals, per GPU as they are', () => {
  for (const family of FAMILIES) {
    for (const name of family.names) {
      const signal = signals.get(name);
      assert.ok(signal, `family ${family.id}: ${name} is not in the vocabulary`);
      assert.equal(Boolean(family.perGpu), perGpu(signal),
        `family ${family.id}: ${name} is ${signal.scope}-wide`);
    }
  }
});

test('every signal the agents send has a family', () => {
  const charted = new Set(FAMILIES.flatMap((f) => f.names));
  const missing = table.signals.filter((s) => !s.sent_by && !charted.has(s.name))
    .map((s) => s.name);
  assert.deepEqual(missing, []);
});
