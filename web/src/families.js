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

const SHORT_LABELS = {
  disk_throughput_read: 'read',
  disk_throughput_write: 'write',
  net_throughput_sent: 'sent',
  net_throughput_recv: 'received',
};

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

// The legend label of one series in its family's chart.
export function seriesLabel(family, series) {
  if (family.perGpu) return series.gpuUuid || 'agent';
  if (family.names.length > 1) return SHORT_LABELS[series.name] || series.name;
  return series.name;
}
