// The sign-in form: shown when metricsd answers 401 (no token, or one that
// is unknown, expired or revoked). It takes an API token (metricsctl tokens
// create --role=viewer) and goes back to where the user was.

import { signIn } from './session.js';

export function showSignIn(root, { rejected, onSignedIn }) {
  root.innerHTML = '';
  const form = document.createElement('form');
  form.className = 'sign-in';
  form.innerHTML = '<h1>Sign in</h1>' +
    '<p>The metrics service needs an API token. Paste one (for reading, ' +
    '<code>metricsctl tokens create --role=viewer</code> makes one), or open ' +
    'the address <code>./run.sh</code> printed.</p>' +
    '<label>API token <input id="token" type="password" autocomplete="off" ' +
    'spellcheck="false" required></label> <button type="submit">Sign in</button>';
  if (rejected) {
    const p = document.createElement('p');
    p.className = 'status error';
    p.id = 'sign-in-error';
    p.textContent = 'The service did not accept the token: it is unknown, expired or revoked.';
    form.append(p);
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = form.querySelector('#token').value.trim();
    if (!value) return;
    signIn(value);
    onSignedIn();
  });
  root.append(form);
  form.querySelector('#token').focus();
}
