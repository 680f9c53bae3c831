// The trial list: every trial with its state, newest first, 50 a page,
// each linking to its profiler view, with when its agents last reported
// and how many of an ACTIVE trial's agents are stale (quiet longer than
// the server's --stale-after). Ticking up to 8 trials and "Compare" opens
// them side by side (summary_view.js).

import { listTrials } from './api.js';
import { formatDuration, formatTime } from './format.js';
import { showError } from './messages.js';
import { MAX_COMPARED } from './summary_view.js';

// "3 agents", "1 of 3 agents stale", or empty for a trial without samples.
function agentsText(agents) {
  if (agents.length === 0) return '';
  const stale = agents.filter((a) => a.stale).length;
  const noun = agents.length === 1 ? 'agent' : 'agents';
  if (stale === 0) return `${agents.length} ${noun}`;
  return `<span class="stale">${stale} of ${agents.length} ${noun} stale</span>`;
}

function row(trial) {
  const agents = trial.agents || [];
  const lastSample = agents.reduce((last, a) => Math.max(last, Date.parse(a.lastSampleAt)), -Infinity);
  const tr = document.createElement('tr');
  tr.dataset.trialId = String(trial.id);
  const created = Date.parse(trial.createdAt);
  const ended = trial.endedAt ? Date.parse(trial.endedAt) : null;
  const cells = [
    `<input type="checkbox" class="compare" value="${trial.id}" aria-label="Compare trial ${trial.id}">`,
    `<a href="#/trials/${trial.id}">Trial ${trial.id}</a>`,
    `<span class="state state-${trial.state.toLowerCase()}">${trial.state}</span>`,
    formatTime(created),
    ended ? formatTime(ended) : '',
    formatDuration((ended || Date.now()) - created),
    agentsText(agents),
    Number.isFinite(lastSample) ? formatTime(lastSample) : '',
  ];
  tr.dataset.staleAgents = String(agents.filter((a) => a.stale).length);
  for (const html of cells) {
    const td = document.createElement('td');
    td.innerHTML = html;
    tr.append(td);
  }
  return tr;
}

export async function showTrialList(root) {
  root.innerHTML = '<p class="status">Loading trials…</p>';
  let page;
  try {
    page = await listTrials();
  } catch (e) {
    showError(root, 'The trial list could not be loaded.', e, () => showTrialList(root));
    return () => {};
  }
  const trials = page.trials || [];
  if (trials.length === 0) {
    root.innerHTML = '<h1>Trials</h1><p class="status">No trials yet. A trial appears here ' +
      'once the platform registers it (POST /api/v1/trials).</p>';
    return () => {};
  }
  root.innerHTML = '<h1>Trials</h1>';
  const table = document.createElement('table');
  table.className = 'trials';
  table.innerHTML = '<thead><tr><th></th><th>Trial</th><th>State</th><th>Started</th>' +
    '<th>Ended</th><th>Duration</th><th>Agents</th><th>Last sample</th></tr></thead>';
  const body = document.createElement('tbody');
  trials.forEach((t) => body.append(row(t)));
  table.append(body);
  const compare = document.createElement('button');
  compare.id = 'compare';
  const ticked = () => [...body.querySelectorAll('input.compare:checked')].map((c) => c.value);
  const update = () => {
    const n = ticked().length;
    compare.textContent = n ? `Compare ${n} trial${n === 1 ? '' : 's'}` : 'Compare';
    compare.disabled = n === 0 || n > MAX_COMPARED;
    compare.title = n > MAX_COMPARED ? `At most ${MAX_COMPARED} trials at once`
      : 'Tick trials to lay their charts over each other';
  };
  body.addEventListener('change', update);
  compare.addEventListener('click', () => {
    location.hash = `#/compare?trials=${ticked().join(',')}`;
  });
  update();
  root.append(compare, table);

  let last = trials[trials.length - 1].id;
  if (trials.length === 50) {
    const more = document.createElement('button');
    more.textContent = 'Older trials';
    more.addEventListener('click', async () => {
      more.disabled = true;
      try {
        const older = (await listTrials({ beforeId: last })).trials || [];
        older.forEach((t) => body.append(row(t)));
        if (older.length > 0) last = older[older.length - 1].id;
        if (older.length < 50) more.remove();
      } catch (e) {
        more.textContent = `Older trials (failed: ${e.message})`;
      }
      more.disabled = false;
    });
    root.append(more);
  }
  return () => {};
}
