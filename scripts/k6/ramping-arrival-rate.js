// Open model: 25, 50, 100, 200, 400 iterations/s held STEP_S seconds each.
// Every iteration is one request and a 25 ms pause; maxVUs 8 is too few for
// the last step on purpose, so k6 falls behind its schedule there and says so
// with the dropped_iterations metric.
import { sleep } from 'k6';
import { oneRequest, STEP_S, systemTags } from './common.js';

const rates = [25, 50, 100, 200, 400];
const stages = [];
for (const r of rates) {
  stages.push({ duration: '0s', target: r });
  stages.push({ duration: `${STEP_S}s`, target: r });
}

export const options = {
  systemTags,
  scenarios: {
    rates: {
      executor: 'ramping-arrival-rate',
      startRate: rates[0],
      timeUnit: '1s',
      preAllocatedVUs: 4,
      maxVUs: 8,
      stages,
      gracefulStop: '5s',
    },
  },
};

export default function () {
  oneRequest();
  sleep(0.025);
}
