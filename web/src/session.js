// The page's API token: kept in this tab's session storage (gone when the
// tab closes, never shared with other tabs or sent anywhere but metricsd's
// own API), taken once from an address of the form /#token=<token> (what
// run.sh prints) and then removed from the address bar and history.

const KEY = 'metricsd.token';

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function signIn(value) {
  sessionStorage.setItem(KEY, value.trim());
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

// Moves a token in the address's fragment (never sent to the server, so in
// no access log) into session storage; true when there was one.
export function takeTokenFromAddress() {
  const match = location.hash.match(/^#token=([^&]+)$/);
  if (!match) return false;
  signIn(decodeURIComponent(match[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
  return true;
}

// The headers that carry the token on every call.
export function authHeaders() {
  const value = token();
  return value ? { Authorization: `Bearer ${value}` } : {};
}
