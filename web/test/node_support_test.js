// Every npm package the page, its tests and the OpenTelemetry exporters'
// test (tests/otel_clients) lock must run on Debian 12's Node.js (18), which
// setup.sh installs where no node is present. Machines
// that carry a newer Node would not notice a lock that drops it, so this
// reads each locked package's declared "engines.node" (node --test).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const DEBIAN_12_NODE = [18, 20, 4];  // nodejs 18.20.4+dfsg-1~deb12u*

// Whether version [major, minor, patch] satisfies an npm range made of
// ">=X[.Y[.Z]]", "^X[.Y[.Z]]" and "X.*" parts joined by "||" (the forms the
// locked packages use; ">=X.*" reads as ">=X"). Any other form throws, so a
// new one is looked at, not silently passed.
function satisfies(version, range) {
  return range.split('||').some((part) => {
    const m = part.trim().match(/^(>=|\^)?\s*(\d+)(?:\.(\d+|\*))?(?:\.(\d+))?$/);
    if (!m || (!m[1] && m[3] !== '*')) throw new Error(`unsupported engines range "${range}"`);
    if (!m[1]) return version[0] === Number(m[2]);  // "X.*"
    const floor = [Number(m[2]), m[3] === '*' ? 0 : Number(m[3] ?? 0), Number(m[4] ?? 0)];
    const cmp = version.map((v, i) => v - floor[i]).find((d) => d !== 0) ?? 0;
    return cmp >= 0 && (m[1] === '>=' || version[0] === floor[0]);
  });
}

test('range forms', () => {
  assert.ok(satisfies([18, 20, 4], '>=18'));
  assert.ok(!satisfies([18, 20, 4], '>=20'));
  assert.ok(satisfies([18, 20, 4], '>=18.19.0'));
  assert.ok(!satisfies([18, 20, 4], '>=18.20.5'));
  assert.ok(satisfies([18, 20, 4], '^16 || ^18.0.0'));
  assert.ok(!satisfies([18, 20, 4], '^20.0.0 || >=22'));
  assert.ok(satisfies([18, 20, 4], '6.* || 8.* || >= 10.*'));
  assert.ok(!satisfies([18, 20, 4], '6.* || 20.*'));
  assert.ok(satisfies([18, 20, 4], '18.*'));
  assert.throws(() => satisfies([18, 20, 4], '18.x'), /unsupported/);
  assert.throws(() => satisfies([18, 20, 4], '18'), /unsupported/);
});

for (const lockFile of ['../package-lock.json', '../../tests/otel_clients/package-lock.json']) {
  test(`every package ${lockFile.slice(3)} locks runs on Debian 12's Node.js`, () => {
    const lock = JSON.parse(readFileSync(new URL(lockFile, import.meta.url), 'utf8'));
    const refused = Object.entries(lock.packages)
      .filter(([name, p]) => name !== '' && p.engines?.node &&
        !satisfies(DEBIAN_12_NODE, p.engines.node))
      .map(([name, p]) => `${name}@${p.version} needs node ${p.engines.node}`);
    assert.deepEqual(refused, []);
  });
}
