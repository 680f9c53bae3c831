// Error and notice blocks that say what happened and offer what to do.

// `text` as a whole sentence: a capital first letter and a full stop (the
// service's messages are lower-case clauses: "trial 7 does not exist").
export function sentence(text) {
  const trimmed = String(text).trim();
  if (!trimmed) return '';
  const capital = trimmed[0].toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

// Replaces `root`'s content with a titled error; `retry`, if given, is
// called by a Retry button.
export function showError(root, title, error, retry) {
  root.innerHTML = '';
  const box = document.createElement('div');
  box.className = 'error-box';
  box.dataset.kind = error.unreachable ? 'unreachable' : 'error';
  const h = document.createElement('h1');
  h.textContent = title;
  const p = document.createElement('p');
  p.textContent = sentence(error.message);
  box.append(h, p);
  if (retry) {
    const button = document.createElement('button');
    button.textContent = 'Retry';
    button.addEventListener('click', retry);
    box.append(button);
  }
  const back = document.createElement('p');
  back.innerHTML = '<a href="#/">Back to the trial list</a>';
  box.append(back);
  root.append(box);
}
