// The documentation holds together: every relative link in README.md,
// docs/*.md and bench/README.md names a file of the repository and, with an
// anchor, a heading of that file (as GitHub makes anchors of headings); the
// flags docs/operating.md lists for metricsd are the ones `metricsd
// --helpfull` has, and its metricsctl commands the ones `metricsctl --help`
// has; the README's Layout names every folder at the top and in server/;
// and docs/clients.md lists every signal of the vocabulary's table with its
// unit.
//
// Usage: node docs_test.mjs PATH/TO/metricsd PATH/TO/metricsctl

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [metricsdPath, metricsctlPath] = process.argv.slice(2);

const documents = ['README.md', 'bench/README.md',
  ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

// The text outside fenced code blocks and inline code: what renders as links.
function prose(text) {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');
}

// GitHub's anchor for each heading: lower case, punctuation dropped, spaces
// to hyphens, a repeated one numbered.
function anchorsOf(file) {
  const seen = new Map();
  const anchors = new Set();
  const text = readFileSync(path.join(root, file), 'utf8').replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
  for (const [, heading] of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) || 0;
    seen.set(base, n + 1);
    anchors.add(n ? `${base}-${n}` : base);
  }
  return anchors;
}

test('every relative link and anchor in the docs resolves', () => {
  const broken = [];
  let links = 0;
  for (const file of documents) {
    const text = prose(readFileSync(path.join(root, file), 'utf8'));
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^(https?:|mailto:)/.test(target)) continue;
      links += 1;
      const [where, anchor] = target.split('#');
      const resolved = where ? path.normalize(path.join(path.dirname(file), where)) : file;
      if (resolved.startsWith('..') || !existsSync(path.join(root, resolved))) {
        broken.push(`${file}: ${target} (no such file)`);
      } else if (anchor !== undefined && statSync(path.join(root, resolved)).isFile() &&
                 !anchorsOf(resolved).has(anchor)) {
        broken.push(`${file}: ${target} (no such heading in ${resolved})`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(links > 20, `only ${links} links found: is the pattern right?`);
});

test('the docs list metricsd\'s flags, all of them', { skip: !metricsdPath }, () => {
  // Abseil's help exits 1.
  const help = spawnSync(metricsdPath, ['--helpfull'], { encoding: 'utf8' }).stdout;
  const own = help.split(/\n\s*Flags from /)
    .find((part) => part.split('\n')[0].endsWith('server/main.cc:'));
  const fromHelp = new Set([...own.matchAll(/^ {4}--(\w+) \(/gm)].map((m) => m[1]));
  const operating = readFileSync(path.join(root, 'docs/operating.md'), 'utf8');
  const table = operating.split('### `metricsd`')[1].split('\n### ')[0];
  const documented = new Set([...table.matchAll(/^\| ([^|]*)\|/gm)]
    .flatMap((row) => [...row[1].matchAll(/`--([\w-]+)`/g)].map((m) => m[1].replace(/-/g, '_'))));
  assert.deepEqual([...fromHelp].filter((f) => !documented.has(f)), [], 'flags the docs leave out');
  assert.deepEqual([...documented].filter((f) => !fromHelp.has(f)), [], 'flags metricsd lacks');
});

test('the docs list metricsctl\'s commands, all of them', { skip: !metricsctlPath }, () => {
  const help = spawnSync(metricsctlPath, ['--help'], { encoding: 'utf8' }).stdout;
  const commands = (text, prefix) => new Set([...text.matchAll(
    new RegExp(`^${prefix}([a-z]+ [a-z]+)`, 'gm'))].map((m) => m[1]));
  const fromHelp = commands(help, ' {2}');
  const operating = readFileSync(path.join(root, 'docs/operating.md'), 'utf8');
  const documented = commands(operating, 'metricsctl ');
  assert.ok(fromHelp.size >= 8, [...fromHelp].join(', '));
  assert.deepEqual([...fromHelp].filter((c) => !documented.has(c)), [], 'commands the docs leave out');
  assert.deepEqual([...documented].filter((c) => !fromHelp.has(c)), [], 'commands metricsctl lacks');
});

test('the README\'s Layout names every folder at the top and in server/', () => {
  // What .gitignore keeps out at the top (build folders, data) is no part of
  // the layout.
  const ignored = new Set(readFileSync(path.join(root, '.gitignore'), 'utf8').split('\n')
    .map((line) => line.match(/^\/([^/*]+)\/$/)).filter(Boolean).map((m) => m[1]));
  const folders = (dir) => readdirSync(path.join(root, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !(dir === '' && ignored.has(e.name)))
    .map((e) => `${dir}${e.name}/`);
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const layout = readme.split('\n## Layout\n')[1].split('\n## ')[0];
  const listed = new Set([...layout.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]));
  const all = [...folders(''), ...folders('server/')];
  assert.ok(all.length > 20, `only ${all.length} folders found: is the walk right?`);
  assert.deepEqual(all.filter((f) => !listed.has(f)), [], 'folders the Layout leaves out');
});


test('docs/clients.md lists every signal of the vocabulary with its unit', () => {
  const table = JSON.parse(readFileSync(path.join(root, 'common/vocabulary/signals.json'), 'utf8'));
  const clients = readFileSync(path.join(root, 'docs/clients.md'), 'utf8');
  // A table row naming the signal in code, its unit in a later cell.
  const rows = clients.split('\n').filter((line) => line.startsWith('|'));
  const missing = table.signals.filter((s) => !s.sent_by).filter((s) => !rows.some((row) => {
    const cells = row.split('|').map((c) => c.trim());
    const at = cells.findIndex((c) => c.includes(`\`${s.name}\``));
    return at >= 0 && cells.slice(at + 1).some((c) => c.split(/, /).includes(s.unit) ||
      c === s.unit);
  })).map((s) => `${s.name} (${s.unit})`);
  assert.deepEqual(missing, [], 'signals docs/clients.md lists without their unit');
});
