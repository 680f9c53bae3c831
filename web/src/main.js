// The page's router: "#/" is the trial list, "#/trials/<id>" a trial's
// profiler view. Each view returns a function that stops what it started
// (a follow stream) when the page moves on. A 401 from any call shows the
// sign-in form in place of the view; signing in shows the view again.

import { getConfig } from './api.js';
import { ProfilerView } from './profiler_view.js';
import { takeTokenFromAddress, token, signOut } from './session.js';
import { showSignIn } from './sign_in.js';
import { showTrialList } from './trial_list.js';

const root = document.getElementById('app');
const crumb = document.getElementById('crumb');
let closeView = () => {};
let config = null;

async function route() {
  closeView();
  closeView = () => {};
  if (config === null) config = await getConfig();
  const match = location.hash.match(/^#\/trials\/(\d+)$/);
  if (match) {
    const view = new ProfilerView(root, Number(match[1]), config);
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
