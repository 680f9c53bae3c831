// The public REST API of metricsd (/api/v1/...), as the page uses it: the
// same calls any other client makes. Every failure is an ApiError whose
// message says what happened: the service could not be reached, or it
// answered with an error (its own message, which names the cause). Every
// call carries the session's API token; a 401 drops it and, once the
// caller has handled the error, fires "metricsd:sign-in" on window.

import { authHeaders, signOut, token } from './session.js';

export class ApiError extends Error {
  // status 0: no answer at all (service down, network gone).
  constructor(message, status = 0, code = 0) {
    super(message);
    this.status = status;
    this.code = code;
  }

  get unreachable() {
    return this.status === 0;
  }
}

// After the view's own catch has run (it shows an error), so that the
// sign-in form replaces that error rather than the reverse.
function signInRequired() {
  const hadToken = token() !== '';
  signOut();
  setTimeout(() => window.dispatchEvent(
    new CustomEvent('metricsd:sign-in', { detail: { rejected: hadToken } })), 0);
}

function withToken(init) {
  return { ...init, headers: { ...(init.headers || {}), ...authHeaders() } };
}

function unreachable(cause) {
  return new ApiError(
    `Cannot reach the metrics service at ${location.origin} (${cause.message}). ` +
      'Is metricsd running?');
}

async function request(path, init = {}) {
  let response;
  let text;
  try {
    response = await fetch(path, withToken(init));
    text = await response.text();
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw unreachable(e);
  }
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    body = null;
  }
  if (!response.ok) throw failure(response, body);
  return body;
}

// The ApiError of a failed answer (its JSON error body, if any).
function failure(response, body) {
  if (response.status === 401) signInRequired();
  const message = body && body.message ? body.message : `HTTP ${response.status}`;
  return new ApiError(message, response.status, body ? body.code : 0);
}

// Chart data in the compact CHART view (server/rest/chart_json.h).
function chartQuery({ names = [], agentId, gpuUuids = [], startMs, endMs, maxPoints,
  resolutionMs }) {
  const params = new URLSearchParams({ view: 'CHART' });
  for (const name of names) params.append('name', name);
  if (agentId !== undefined) params.append('agentId', agentId);
  for (const gpu of gpuUuids) params.append('gpuUuid', gpu);
  if (startMs !== undefined) params.append('start', new Date(startMs).toISOString());
  if (endMs !== undefined) params.append('end', new Date(endMs).toISOString());
  if (maxPoints !== undefined) params.append('maxPoints', String(maxPoints));
  if (resolutionMs !== undefined) params.append('resolutionUs', String(Math.round(resolutionMs * 1000)));
  return params.toString();
}

export function listTrials({ limit = 50, beforeId } = {}) {
  const params = new URLSearchParams({ limit: String(limit) });
  if (beforeId) params.append('beforeId', String(beforeId));
  return request(`/api/v1/trials?${params}`);
}

export function getTrial(trialId) {
  return request(`/api/v1/trials/${trialId}`);
}

export function listSeries(trialId) {
  return request(`/api/v1/trials/${trialId}/metrics/system/series`);
}

// Chart data: {start, end, view, rawExpired (when true), series: [{series, resolutionMs,
// lastSampleMs, firstBucketMs or bucketStartMs, min, max, mean}]} (see
// server/rest/chart_json.h).
export function querySeries(trialId, query, signal) {
  return request(`/api/v1/trials/${trialId}/metrics/system?${chartQuery(query)}`, { signal });
}

// Summaries of up to 8 trials (GET /api/v1/metrics/system/summary, CHART
// view), every metric: each pooled across GPUs into one line per trial (group
// TRIAL) or per agent (AGENT); in relative time the window is offsets from
// each trial's start and each series carries originMs.
export function summarize({ trialIds, group = 'TRIAL', gpuIndex, relative = false,
  startMs, endMs, maxPoints }, signal) {
  const params = new URLSearchParams({ view: 'CHART', group });
  for (const id of trialIds) params.append('trialId', String(id));
  if (gpuIndex !== undefined && gpuIndex !== '') params.append('gpuIndex', String(gpuIndex));
  if (relative) {
    params.append('relative', 'true');
    if (startMs !== undefined) params.append('offsetStartMs', String(Math.max(0, Math.round(startMs))));
    if (endMs !== undefined) params.append('offsetEndMs', String(Math.round(endMs)));
  } else {
    if (startMs !== undefined) params.append('start', new Date(startMs).toISOString());
    if (endMs !== undefined) params.append('end', new Date(endMs).toISOString());
  }
  if (maxPoints !== undefined) params.append('maxPoints', String(maxPoints));
  return request(`/api/v1/metrics/system/summary?${params}`, { signal });
}

// Follows chart data: calls onResult with each message (the current answer,
// then the buckets that changed) until the stream ends, which it does when
// the trial ends. Rejects with ApiError on failure; abort with `signal`.
export async function followSeries(trialId, query, onResult, signal) {
  const path = `/api/v1/trials/${trialId}/metrics/system/follow?${chartQuery(query)}`;
  let response;
  try {
    response = await fetch(path, withToken({ signal }));
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw unreachable(e);
  }
  if (!response.ok) {
    if (response.status === 401) signInRequired();
    let message = `HTTP ${response.status}`;
    try {
      message = JSON.parse(await response.text()).message || message;
    } catch (e) {
      // The status line is all there is to say.
    }
    throw new ApiError(message, response.status);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw unreachable(e);
    }
    if (chunk.done) return;
    pending += decoder.decode(chunk.value, { stream: true });
    let newline;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline).trim();
      pending = pending.slice(newline + 1);
      if (!line) continue;
      const message = JSON.parse(line);
      if (message.error) throw new ApiError(message.error.message, 500, message.error.code);
      if (message.result) onResult(message.result);
    }
  }
}

// What the operator configured for the page ({grafanaUrl}).
// Saves an export of one agent's series over a window as a file: 'csv' (raw
// samples, GET .../export.csv) or 'trace' (Chrome trace, GET .../trace). It
// is fetched with the token (a plain link could not send it) and held in
// memory until saved, so the page offers it for the window on screen.
// Resolves to {fileName, bytes}.
export async function downloadExport(trialId, kind, { agentId, startMs, endMs }) {
  const params = new URLSearchParams();
  if (agentId !== undefined) params.append('agentId', agentId);
  if (startMs !== undefined) params.append('start', new Date(startMs).toISOString());
  if (endMs !== undefined) params.append('end', new Date(endMs).toISOString());
  const route = kind === 'csv' ? 'export.csv' : 'trace';
  let response;
  let blob;
  try {
    response = await fetch(`/api/v1/trials/${trialId}/metrics/system/${route}?${params}`,
      withToken({}));
    blob = await response.blob();
  } catch (e) {
    throw unreachable(e);
  }
  if (!response.ok) {
    let body = null;
    try {
      body = JSON.parse(await blob.text());
    } catch (e) {
      body = null;
    }
    throw failure(response, body);
  }
  const disposition = response.headers.get('Content-Disposition') || '';
  const named = /filename="([^"]+)"/.exec(disposition);
  const fileName = named ? named[1] : `trial-${trialId}-system-metrics.${kind}`;
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return { fileName, bytes: blob.size };
}

export async function getConfig() {
  try {
    return await request('/ui/config.json');
  } catch (e) {
    return { grafanaUrl: '' };
  }
}
