// The page's router: "#/" is the trial list, "#/trials/<id>" a trial's
// profiler view ("?agent=<id>" picks the agent shown), "#/trials/<id>/nodes"
// every agent of a trial at once, "#/compare?trials=7,9" runs compared.
// Each view returns a function that stops what it started (a follow
// stream) when the page moves on. A 401 from any call shows the
// sign-in form in place of the view; signing in shows the view again.

import { getConfig } from './api.js';
import { ProfilerView } from './profiler_view.js';
import { takeTokenFromAddress, token, signOut } from './session.js';
import { showSignIn } from './sign_in.js';
import { SummaryView } from './summary_view.js';
import { showTrialList } from './trial_list.js';

const root = document.getElementById('app');
const crumb = document.getElementById('crumb');
let closeView = () => {};
let config = null;

async function route() {
  closeView();
  closeView = () => {};
  if (config === null) config = await getConfig();
  const match = location.hash.match(/^#\/trials\/(\d+)(?:\?agent=([^&]*))?$/);
  const nodes = location.hash.match(/^#\/trials\/(\d+)\/nodes$/);
  const compare = location.hash.match(/^#\/compare\?trials=([\d,]*)$/);
  if (nodes || compare) {
    const ids = nodes ? [Number(nodes[1])]
      : [...new Set(compare[1].split(',').filter(Boolean).map(Number))];
    const view = new SummaryView(root, nodes ? 'nodes' : 'compare', ids);
    window.profiler = view;
    closeView = () => view.close();
    crumb.textContent = nodes ? `› Trial ${ids[0]} › All agents` : `› Compare ${ids.join(', ')}`;
    await view.start();
  } else if (match) {
    let agent;
    try {
      agent = match[2] === undefined ? undefined : decodeURIComponent(match[2]);
    } catch (e) {
      agent = undefined;  // not percent-encoding: the first agent, as without one
    }
    const view = new ProfilerView(root, Number(match[1]), config, agent);
    // For the browser test and for looking at the charts from the console.
    window.profiler = view;
    closeView = () => view.close();
    crumb.textContent = `› Trial ${match[1]}`;
    await view.start();
  } else if (location.hash === '' || location.hash === '#/') {
    crumb.textContent = '';
    closeView = await showTrialList(root);
  } else {
    crumb.textContent = '';
    root.innerHTML = '<h1>Page not found</h1><p><a href="#/">Back to the trial list</a></p>';
  }
}

const signOutLink = document.getElementById('sign-out');

function showSignOutLink() {
  signOutLink.hidden = token() === '';
}

// Stops the view and shows the sign-in form; `rejected` says the token
// just used was refused.
function askForToken(rejected) {
  closeView();
  closeView = () => {};
  crumb.textContent = '';
  showSignOutLink();
  showSignIn(root, { rejected, onSignedIn: () => { showSignOutLink(); route(); } });
}

signOutLink.addEventListener('click', (event) => {
  event.preventDefault();
  signOut();
  askForToken(false);
});

window.addEventListener('metricsd:sign-in', (event) => {
  // The other calls of the same view fail too: one form is enough.
  if (!root.querySelector('form.sign-in')) askForToken(event.detail.rejected);
});

// The address run.sh prints may also be pasted into an open tab.
function onAddress() {
  takeTokenFromAddress();
  showSignOutLink();
  route();
}

window.addEventListener('hashchange', onAddress);
onAddress();
