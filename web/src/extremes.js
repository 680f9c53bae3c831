// Which bucket extremes leave their line: the rule by which a chart draws a
// bucket's minimum or maximum in its line's colour, whatever the number of
// lines. Pure functions; tested by test/extremes_test.js.
//
// A bucket's spread is the larger of its distances from mean to minimum and
// from mean to maximum. An extreme leaves its line when it lies farther
// from the line than both MIN_PX and FACTOR times the line's typical spread
// around that bucket. The line at a bucket spans its mean and the means of
// the buckets beside it, since it is drawn through them: at a step from
// 90 % to 30 % the bucket's range is already the line's own path.
//
// The typical spread is the median spread of the BLOCK buckets the bucket
// falls in, or of the neighbouring block nearer to it if that is larger. So
// a near-OOM dip or a one-sample stall in a steady run is drawn, while a
// line's ordinary noise is not: eight GPUs swinging between 85 % and 95 %
// stay eight lines instead of eight overlapping bands. It is local, so a
// run that is calm for a day and noisy the next is judged against the noise
// around each bucket (near the change, against the noisier side). Blocks,
// not a median sliding over every bucket: a page of 25 lines computes them
// in a few milliseconds, before the browser has compiled this code.

export const BLOCK = 32;  // buckets: about 32 px at a bucket a pixel
export const FACTOR = 2;
export const MIN_PX = 3;  // closer than this, the extreme is under the line anyway

// Per bucket of one line (its mean, min and max columns, null where it has
// none), its typical spread (above); null where neither block has a spread.
export function typicalSpreads(mean, min, max, block = BLOCK) {
  const n = mean.length;
  const spreads = new Float64Array(n);
  const has = new Uint8Array(n);
  for (let j = 0; j < n; j++) {
    if (mean[j] !== null && min[j] !== null && max[j] !== null) {
      spreads[j] = Math.max(mean[j] - min[j], max[j] - mean[j]);
      has[j] = 1;
    }
  }
  const blocks = Math.ceil(n / block);
  const medians = new Array(blocks);
  const scratch = new Float64Array(block);
  for (let b = 0; b < blocks; b++) {
    let k = 0;
    for (let j = b * block; j < Math.min(n, (b + 1) * block); j++) {
      if (has[j]) scratch[k++] = spreads[j];
    }
    medians[b] = k ? scratch.subarray(0, k).sort()[k >> 1] : null;
  }
  const typical = new Array(n);
  for (let j = 0; j < n; j++) {
    const b = Math.floor(j / block);
    const near = j % block < block / 2 ? b - 1 : b + 1;
    const own = medians[b];
    const other = near >= 0 && near < blocks ? medians[near] : null;
    typical[j] = own === null ? other : other === null ? own : Math.max(own, other);
  }
  return typical;
}

// Whether bucket `j`'s minimum and maximum leave the line, on a y scale of
// `pxPerUnit` pixels per unit of value: { low, high }.
export function departures(j, mean, min, max, typical, pxPerUnit) {
  const m = mean[j];
  if (m === null || min[j] === null || max[j] === null || typical[j] === null) {
    return { low: false, high: false };
  }
  let bottom = m;
  let top = m;
  for (const k of [j - 1, j + 1]) {
    if (k >= 0 && k < mean.length && mean[k] !== null) {
      bottom = Math.min(bottom, mean[k]);
      top = Math.max(top, mean[k]);
    }
  }
  const limit = Math.max(MIN_PX, FACTOR * typical[j] * pxPerUnit);
  return { low: (bottom - min[j]) * pxPerUnit > limit, high: (max[j] - top) * pxPerUnit > limit };
}
