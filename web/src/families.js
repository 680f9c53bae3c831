// The metric families the profiler view charts, one chart each, in page
// order (the design's system metrics). A series whose name no family lists
// (a client's own) gets a chart of its own after these. Families of a
// `group` are shown together in a section that folds away (the GPU's
// other NVML signals); a `share` family charts one series as a percentage
// of another (memory used of total, per GPU); a `reference` series is drawn
// as a dashed level (the power limit), not as a line.

export const GROUPS = { gpu_more: 'More GPU signals' };

const more = (id, title, name) => ({ id, title, names: [name], perGpu: true, group: 'gpu_more' });

export const FAMILIES = [
  { id: 'gpu_util', title: 'GPU utilization', names: ['gpu_util'], perGpu: true },
  { id: 'gpu_free_memory', title: 'GPU free memory', names: ['gpu_free_memory'], perGpu: true },
  { id: 'gpu_memory_used', title: 'GPU memory used (of total)',
    names: ['gpu_memory_used', 'gpu_memory_total'], perGpu: true, group: 'gpu_more',
    share: { part: 'gpu_memory_used', whole: 'gpu_memory_total' } },
  { id: 'gpu_power', title: 'GPU power (dashed: power limit)',
    names: ['gpu_power', 'gpu_power_limit'], perGpu: true, group: 'gpu_more',
    reference: 'gpu_power_limit' },
  more('gpu_temperature', 'GPU temperature', 'gpu_temperature'),
  more('gpu_sm_clock', 'GPU SM clock', 'gpu_sm_clock'),
  more('gpu_memory_clock', 'GPU memory clock', 'gpu_memory_clock'),
  more('gpu_memory_util', 'GPU memory controller utilization', 'gpu_memory_util'),
  more('gpu_pcie_rx', 'PCIe received', 'gpu_pcie_rx'),
  more('gpu_pcie_tx', 'PCIe sent', 'gpu_pcie_tx'),
  more('gpu_ecc_corrected', 'ECC errors, corrected', 'gpu_ecc_corrected'),
  more('gpu_ecc_uncorrected', 'ECC errors, uncorrected', 'gpu_ecc_uncorrected'),
  more('gpu_throttle_reasons', 'Clock-throttle reasons (bit set)', 'gpu_throttle_reasons'),
  { id: 'cpu', title: 'CPU utilization', names: ['cpu_util_simple'] },
  { id: 'memory', title: 'Free memory', names: ['memory_free'] },
  // The job's own share (an agent's --pid and --cgroup, the Python profiler).
  { id: 'job_cpu', title: 'Job CPU utilization', names: ['cgroup_cpu_util', 'process_cpu_util'] },
  { id: 'job_memory', title: 'Job memory (dashed: cgroup limit)',
    names: ['cgroup_memory_used', 'process_memory_rss', 'cgroup_memory_limit'],
    reference: 'cgroup_memory_limit' },
  { id: 'job_gpu_memory', title: 'Job GPU memory', names: ['process_gpu_memory'], perGpu: true },
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
  cgroup_cpu_util: 'cgroup (of the CPUs it may use)',
  process_cpu_util: 'processes (100% = one CPU)',
  cgroup_memory_used: 'cgroup',
  process_memory_rss: 'processes (resident)',
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
// the known ones that have data (a share or reference family needs its
// charted series), then one per unknown name.
export function familiesFor(series) {
  const names = new Set(series.map((s) => s.name));
  const known = new Set(FAMILIES.flatMap((f) => f.names));
  const families = FAMILIES.filter((f) => (f.share ? names.has(f.share.part)
    : f.names.some((n) => n !== f.reference && names.has(n))));
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
