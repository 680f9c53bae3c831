// Formatting of values by unit (percent, bytes, bytes/s, anything else),
// of bucket widths and of times, for axes, legends and labels. Pure
// functions; tested by test/format_test.js.

const BINARY_PREFIXES = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
// Units with a symbol: its text and whether it takes SI prefixes (k, M, G).
const SYMBOLS = { watts: ['W', true], hertz: ['Hz', true], celsius: ['°C', false] };

// Three significant digits, without a trailing ".0".
function significant(value) {
  if (value === 0) return '0';
  const abs = Math.abs(value);
  const text = abs >= 100 ? value.toFixed(0) : value.toPrecision(3);
  return text.includes('.') && !text.includes('e') ? text.replace(/\.?0+$/, '') : text;
}

function bytes(value) {
  let scaled = value;
  let i = 0;
  while (Math.abs(scaled) >= 1024 && i < BINARY_PREFIXES.length - 1) {
    scaled /= 1024;
    i += 1;
  }
  return `${significant(scaled)} ${BINARY_PREFIXES[i]}`;
}

function withSymbol(value, unit) {
  const [symbol, prefixed] = SYMBOLS[unit];
  const abs = Math.abs(value);
  const [scale, prefix] = !prefixed ? [1, ''] : abs >= 1e9 ? [1e9, 'G'] : abs >= 1e6 ? [1e6, 'M']
    : abs >= 1e3 ? [1e3, 'k'] : [1, ''];
  return `${significant(value / scale)} ${prefix}${symbol}`;
}

export function formatValue(value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–';
  if (SYMBOLS[unit]) return withSymbol(value, unit);
  switch (unit) {
    case 'percent':
      return `${significant(value)}%`;
    case 'bytes':
      return bytes(value);
    case 'bytes/s':
      return `${bytes(value)}/s`;
    case 'bitset':  // a raw sample is the bits; a bucket's mean is not
      return Number.isInteger(value) && value >= 0 ? `0x${value.toString(16)}` : significant(value);
    default:
      return unit ? `${significant(value)} ${unit}` : significant(value);
  }
}

// A bucket's range, shorter where both ends share a unit: "1.5 – 12.5 GiB",
// "0 – 100%", but "200 MiB – 12.5 GiB".
export function formatRange(low, high, unit) {
  const from = formatValue(low, unit);
  const to = formatValue(high, unit);
  const suffix = (text) => text.replace(/^-?[\d.]+(e[-+]?\d+)?/, '');
  const shared = suffix(from);
  return shared && shared !== from && shared === suffix(to)
    ? `${from.slice(0, from.length - shared.length)} – ${to}` : `${from} – ${to}`;
}

// Decimals that tell ticks `step` apart: as many as the step has.
function decimalsFor(step) {
  let decimals = 0;
  while (decimals < 9) {
    const scaled = step * 10 ** decimals;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * scaled) break;
    decimals += 1;
  }
  return decimals;
}

function fixed(value, decimals) {
  const text = value.toFixed(decimals);
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text;
}

// Axis tick labels for `values`, `step` apart, precise enough that no two
// read the same (ticks 4 GiB apart near 1.35 TiB read "1384 GiB",
// "1388 GiB", not "1.35 TiB" twice). Percent and bytes carry their unit;
// a longer unit names the axis instead (it would crowd the ticks).
export function formatTicks(values, unit, step) {
  if (unit === 'bytes' || unit === 'bytes/s') {
    let p = 0;
    while (p < BINARY_PREFIXES.length - 1 && step >= 1024 ** (p + 1)) p += 1;
    const scale = 1024 ** p;
    const suffix = ` ${BINARY_PREFIXES[p]}${unit === 'bytes/s' ? '/s' : ''}`;
    return values.map((v) => fixed(v / scale, decimalsFor(step / scale)) + suffix);
  }
  if (unit === 'percent') return values.map((v) => `${fixed(v, decimalsFor(step))}%`);
  const [symbol, prefixed] = SYMBOLS[unit] || ['', true];
  const [scale, suffix] = !prefixed ? [1, ''] : step >= 1e9 ? [1e9, 'G'] : step >= 1e6 ? [1e6, 'M']
    : step >= 1e3 ? [1e3, 'k'] : [1, ''];
  const tail = symbol ? ` ${suffix}${symbol}` : suffix;
  return values.map((v) => (v === 0 && !symbol ? '0'
    : fixed(v / scale, decimalsFor(step / scale)) + tail));
}

// Tick steps for byte axes: powers of two of each binary prefix, so ticks
// read 4 GiB, 8 GiB rather than 4.66 GiB, 9.31 GiB.
export function byteTickSteps() {
  const steps = [];
  for (let p = 0; p < BINARY_PREFIXES.length; p++) {
    for (let m = 1; m < 1024; m *= 2) steps.push(m * 1024 ** p);
  }
  return steps;
}

// One line on an agent's hardware, from its inventory (GetTrial's
// AgentInventory): "8 × NVIDIA H100 80GB HBM3 (driver 550.54.15, CUDA
// 12.4); 2 × Intel(R) Xeon(R) Platinum 8480+, 224 threads; 2 TiB". Empty
// when it says nothing.
export function formatHardware(inventory) {
  if (!inventory) return '';
  const parts = [];
  const models = new Map();
  for (const gpu of inventory.gpus || []) {
    const name = gpu.name || 'GPU';
    models.set(name, (models.get(name) || 0) + 1);
  }
  if (models.size) {
    const versions = [inventory.driverVersion && `driver ${inventory.driverVersion}`,
      inventory.cudaVersion && `CUDA ${inventory.cudaVersion}`].filter(Boolean);
    const mig = (inventory.gpus || []).filter((g) => g.migMode === 'enabled').length;
    if (mig) versions.push(`MIG on ${mig}`);
    parts.push([...models].map(([name, n]) => `${n} × ${name}`).join(', ') +
      (versions.length ? ` (${versions.join(', ')})` : ''));
  }
  if (inventory.cpuCount) {
    const sockets = Number(inventory.cpuSockets) || 1;
    parts.push(`${sockets} × ${inventory.cpuModel || 'CPU'}, ${inventory.cpuCount} threads`);
  }
  if (Number(inventory.memoryTotalBytes) > 0) {
    parts.push(bytes(Number(inventory.memoryTotalBytes)));
  }
  return parts.join('; ');
}

// "raw points" for 0, else the bucket width: "10 s", "1 min", "6 h", "1 d";
// rawExpired (the answer's flag) says why buckets stand where raw points
// would be.
export function formatResolution(ms, rawExpired = false) {
  if (rawExpired) return `${formatResolution(ms)} (raw data expired)`;
  if (!ms) return 'raw points';
  const units = [
    [86400000, 'd'],
    [3600000, 'h'],
    [60000, 'min'],
    [1000, 's'],
    [1, 'ms'],
  ];
  for (const [size, name] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${name} buckets`;
  }
  return `${ms} ms buckets`;
}

// A length of time for people: "45 s", "12 min", "3.5 h", "7 d".
export function formatDuration(ms) {
  const s = ms / 1000;
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${significant(s / 3600)} h`;
  return `${significant(s / 86400)} d`;
}

// One time format everywhere (header, axes, legends): the local date as
// "Nov 24" (with the year when it is not this one) and a 24-hour clock.
function dateText(date) {
  const options = { month: 'short', day: 'numeric' };
  if (date.getFullYear() !== new Date().getFullYear()) options.year = 'numeric';
  return date.toLocaleDateString('en-US', options);
}

function clockText(date, seconds) {
  const pad = (n) => String(n).padStart(2, '0');
  const text = `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return seconds ? `${text}:${pad(date.getSeconds())}` : text;
}

// "Nov 24, 21:57:49".
export function formatTime(ms) {
  const date = new Date(ms);
  return `${dateText(date)}, ${clockText(date, true)}`;
}

// Labels of time axis ticks `splitsMs`, `stepMs` apart: the clock with
// seconds when ticks are seconds apart, without when minutes apart, and
// the date alone when days apart; the date is added under the first tick
// and under each tick of a new day.
export function formatTimeTicks(splitsMs, stepMs) {
  let lastDay = '';
  return splitsMs.map((ms) => {
    const date = new Date(ms);
    const day = dateText(date);
    if (stepMs >= 86400000) return day;
    const clock = clockText(date, stepMs < 60000 || date.getSeconds() !== 0);
    const newDay = day !== lastDay;
    lastDay = day;
    return newDay ? `${clock}\n${day}` : clock;
  });
}

// A zoom window of at least `minMs`, around the middle of the one dragged.
export function widenedWindow(startMs, endMs, minMs) {
  if (endMs - startMs >= minMs) return { startMs, endMs };
  const start = Math.floor((startMs + endMs) / 2 - minMs / 2);
  return { startMs: start, endMs: start + minMs };
}
