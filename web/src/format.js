// Formatting of values by unit (percent, bytes, bytes/s, anything else),
// of bucket widths and of times, for axes, legends and labels. Pure
// functions; tested by test/format_test.js.

const BINARY_PREFIXES = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

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

export function formatValue(value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–';
  switch (unit) {
    case 'percent':
      return `${significant(value)}%`;
    case 'bytes':
      return bytes(value);
    case 'bytes/s':
      return `${bytes(value)}/s`;
    default:
      return unit ? `${significant(value)} ${unit}` : significant(value);
  }
}

// An axis tick: as formatValue, but a unit other than the three known ones
// is left to the chart's heading (it would crowd the axis).
export function formatTick(value, unit) {
  return ['percent', 'bytes', 'bytes/s'].includes(unit) ? formatValue(value, unit)
    : significant(value);
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

// "raw points" for 0, else the bucket width: "10 s", "1 min", "6 h", "1 d".
export function formatResolution(ms) {
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

export function formatTime(ms) {
  return new Date(ms).toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}
