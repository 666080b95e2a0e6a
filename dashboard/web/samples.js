// The GPT's generated text: rank 0's sample at each evaluation (the eval
// records' eval_sample, /api/job's eval[].sample), newest first, so what the
// model has learned reads as it improves. The panel stays hidden for a model
// that is not a GPT on text: its evaluations carry no sample.

import { el } from './format.js';

const SHOWN = 8;  // the newest samples; older ones scroll out

// Fills `list` with one entry per evaluation that has a sample; returns how many there are.
export function renderSamples(list, evals) {
  const withText = evals.filter((e) => e.sample).reverse();
  list.replaceChildren(...withText.slice(0, SHOWN).map((e) => el('li', {},
    el('span', { class: 'sample-step', text: `step ${e.step}, eval loss ${e.loss.toFixed(3)}` }),
    el('pre', { class: 'sample', text: e.sample }))));
  return withText.length;
}
