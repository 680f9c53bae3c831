// The page's router: "#/" is the trial list, "#/trials/<id>" a trial's
// profiler view. Each view returns a function that stops what it started
// (a follow stream) when the page moves on.

import { getConfig } from './api.js';
import { ProfilerView } from './profiler_view.js';
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

window.addEventListener('hashchange', route);
route();
