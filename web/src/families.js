// The metric families the profiler view charts, one chart each, in page
// order (the design's system metrics). A series whose name no family lists
// (a client's own) gets a chart of its own after these.

export const FAMILIES = [
  { id: 'gpu_util', title: 'GPU utilization', names: ['gpu_util'], perGpu: true },
  { id: 'gpu_free_memory', title: 'GPU free memory', names: ['gpu_free_memory'], perGpu: true },
  { id: 'cpu', title: 'CPU utilization', names: ['cpu_util_simple'] },
  { id: 'memory', title: 'Free memory', names: ['memory_free'] },
  { id: 'disk_iops', title: 'Disk IOPS', names: ['disk_iops'] },
  { id: 'disk_throughput', title: 'Disk throughput',
    names: ['disk_throughput_read', 'disk_throughput_write'] },
  { id: 'network', title: 'Network throughput',
    names: ['net_throughput_sent', 'net_throughput_recv'] },
];

// A readable name per known metric; the raw name shows on hover.
const DISPLAY_NAMES = {
  gpu_util: 'GPU utilization',
  gpu_free_memory: 'GPU free memory',
  cpu_util_simple: 'CPU utilization',
  memory_free: 'Free memory',
  disk_iops: 'Disk IOPS',
  disk_throughput_read: 'Read',
  disk_throughput_write: 'Write',
  net_throughput_sent: 'Sent',
  net_throughput_recv: 'Received',
};

export function displayName(name) {
  return DISPLAY_NAMES[name] || name;
}

// The families to chart for `series` (ListSeries entries of one agent):
// the known ones that have data, then one per unknown name.
export function familiesFor(series) {
  const names = new Set(series.map((s) => s.name));
  const known = new Set(FAMILIES.flatMap((f) => f.names));
  const families = FAMILIES.filter((f) => f.names.some((n) => names.has(n)));
  for (const name of [...names].filter((n) => !known.has(n)).sort()) {
    const perGpu = series.some((s) => s.name === name && s.gpuUuid);
    families.push({ id: `custom_${name}`, title: name, names: [name], perGpu });
  }
  return families;
}

// GPU names by index: "GPU 0" is the agent's first GPU in the order it
// first reported them (the server's gpuIndex: NVML's order, as nvidia-smi
// numbers them). Returns Map(uuid -> index) for one agent's series.
export function gpuIndexes(series) {
  const first = new Map();
  for (const s of series) {
    if (!s.gpuUuid) continue;
    const index = Number(s.gpuIndex || 0);
    if (!first.has(s.gpuUuid) || index < first.get(s.gpuUuid)) first.set(s.gpuUuid, index);
  }
  const ordered = [...first.keys()].sort((a, b) => first.get(a) - first.get(b) ||
    a.localeCompare(b));
  return new Map(ordered.map((uuid, i) => [uuid, i]));
}

// The legend label of one series in its family's chart, and what its hover
// shows (the UUID of a GPU, the raw name of a metric).
export function seriesLabel(family, series, gpus) {
  if (family.perGpu) {
    if (!series.gpuUuid) return { text: 'agent', title: series.name };
    const index = gpus && gpus.has(series.gpuUuid) ? gpus.get(series.gpuUuid) : null;
    return index === null ? { text: series.gpuUuid, title: series.gpuUuid }
      : { text: `GPU ${index}`, title: series.gpuUuid };
  }
  return { text: displayName(series.name), title: series.name };
}
