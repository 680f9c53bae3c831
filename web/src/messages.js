// Error and notice blocks that say what happened and offer what to do.

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
  p.textContent = error.message;
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
